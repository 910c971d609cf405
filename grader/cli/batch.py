"""Instructor commands that grade a class: `grader batch` and `grader regrade`.

Small click functions over grader/course/batch.py and grader/store (imported when a command runs, so
`grader grade` does not pay for SQLAlchemy or torch). Exit codes: 0 done; 1 done, but some
submissions could not be graded because the grader failed (run the command again to retry them:
limits.GRADER_ATTEMPTS gradings in all, then a final `crash`), or `batch` skipped an entry of
SOURCE that looks like a learner's (a folder, archive or exercise file no layout could place) and
was not given `--allow-skipped`: a learner may be missing; 2 usage or input error (unknown
exercise, unreadable SOURCE, unusable or missing gradebook, jail refused). Every echo of data
goes through grader.cli.common.echo (no raw terminal sequences).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.cli.common import (
    EXIT_FAIL,
    EXIT_PASS,
    course_option,
    db_option,
    echo,
    get_exercise,
    lang_option,
    load_course,
    read_roster_option,
    roster_options,
    usage_error,
)


def executor_options(f):
    f = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="Grade on this Dask distributed cluster (tcp://HOST:PORT) instead of locally.",
    )(f)
    f = click.option(
        "--workers",
        type=click.IntRange(1, 256),
        default=2,
        show_default=True,
        help="Local worker processes (ignored with --scheduler).",
    )(f)
    f = click.option(
        "--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal)."
    )(f)
    return f


def _run(fn, *args, **kwargs):
    from grader.course.batch import BatchError

    try:
        return fn(*args, **kwargs)
    except BatchError as exc:
        usage_error(str(exc))
    except KeyboardInterrupt:
        echo("interrupted: the grades recorded so far are kept; run the same command to finish", err=True)
        sys.exit(130)


@click.command()
@click.argument("exercise")
@click.argument("source", type=click.Path(path_type=Path))
@db_option
@executor_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the class report (class.html), grades.csv and one JSON grade per learner here.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Regrade every submission, even those already graded; and grade SOURCE even when it "
    "looks like no class or another exercise's (refused otherwise, exit 2).",
)
@click.option(
    "--allow-skipped",
    is_flag=True,
    help="Exit 0 even when SOURCE held folders, archives or exercise files that are no learner's.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only show what SOURCE holds: its layout, each learner's files and problems, what is "
    "skipped, and warnings. Nothing is graded; the gradebook is not opened (nor created).",
)
@roster_options
@lang_option
@course_option
def batch(
    exercise,
    source: Path,
    db,
    workers,
    scheduler,
    progress,
    out,
    force,
    allow_skipped,
    dry_run,
    roster,
    missing,
    lang,
    course,
):
    """Grade a class: every learner's submission for EXERCISE in SOURCE, into the gradebook.

    SOURCE is a folder or a zip archive: one sub-folder, file or zip per learner, or a Canvas,
    Moodle or Gradescope submissions download (see grader/intake/sources.py). Only what is new or
    changed since the last run is graded; a batch that was stopped is finished by running it again.
    A SQLite gradebook that does not exist is created. A SOURCE that looks like no class (one
    learner's folder, a folder of no learner's files) or like another exercise's class is refused
    (exit 2, nothing written) unless --force. With --dry-run, SOURCE is only read and shown (exit
    0, 1 when a learner-like entry was skipped, or 2 when it would be refused, as a batch would).
    """
    from grader.course.batch import dry_run as show_source
    from grader.course.batch import run_batch

    ex = get_exercise(exercise)
    if dry_run:
        policy = load_course(course)
        tally = _run(show_source, ex.id, source, echo=echo, zone=policy.zone if policy else None, force=force)
    else:
        tally = _run(
            run_batch,
            ex.id,
            source,
            db,
            workers=workers,
            scheduler=scheduler,
            out=out,
            force=force,
            lang=lang,
            progress=progress,
            echo=echo,
            policy=load_course(course),
            roster=read_roster_option(roster),
            missing=missing,
        )
    if tally.skipped_learners and not allow_skipped:
        echo(
            f"exit 1: {tally.skipped_learners} entries of SOURCE that look like a learner's were "
            "skipped (listed above); check them, or pass --allow-skipped",
            err=True,
        )
        sys.exit(EXIT_FAIL)
    sys.exit(EXIT_FAIL if tally.errors else EXIT_PASS)


@click.command()
@click.argument("exercise")
@db_option
@executor_options
@click.option("--force", is_flag=True, help="Regrade even submissions already graded against this version.")
@click.option(
    "--all", "every", is_flag=True, help="Regrade every stored submission, older and removed ones too."
)
@course_option
def regrade(exercise, db, workers, scheduler, progress, force, every, course):
    """Regrade the current submissions of EXERCISE against its current version; list changed scores.

    Current: the submission that counts for each learner not removed (by --course, else the
    latest seen); --all regrades every stored one. Overrides stay in force over the new grades.
    The gradebook must exist: a missing SQLite file is an error (exit 2), and none is created."""
    from grader.course.batch import regrade as run_regrade

    ex = get_exercise(exercise)
    policy = load_course(course)
    tally, changes = _run(
        run_regrade,
        ex.id,
        db,
        workers=workers,
        scheduler=scheduler,
        force=force,
        progress=progress,
        echo=echo,
        policy=policy,
        every=every,
    )
    if not changes:
        echo("no score changed")
    else:
        echo(f"{len(changes)} score{'s' if len(changes) != 1 else ''} changed:")
        width = max(len(c.learner) for c in changes)
        for c in sorted(changes, key=lambda c: c.learner):
            verdict = (
                ""
                if c.old_passed == c.new_passed
                else "  now passes"
                if c.new_passed
                else "  no longer passes"
            )
            older = "" if c.current else "  (an older submission)"
            echo(
                f"  {c.learner:{width}}  {c.old_score:g} -> {c.new_score:g} / {c.max_score:g}  "
                f"({c.new_score - c.old_score:+g}){verdict}{older}" + (f"  {c.name}" if c.name else "")
            )
    sys.exit(EXIT_FAIL if tally.errors else EXIT_PASS)
