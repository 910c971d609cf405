"""Instructor commands: `grader batch`, `grader regrade`, `grader gradebook export|show`.

Small click functions over grader/batch.py and grader/store (imported when a command runs, so
`grader grade` does not pay for SQLAlchemy). Exit codes: 0 done; 1 done, but some submissions
could not be graded because the grader failed (run the command again to retry them); 2 usage or
input error (unknown exercise, unreadable SOURCE, unusable gradebook, jail refused).
"""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import click

from grader.cli import EXIT_FAIL, EXIT_PASS, get_exercise, main, usage_error

DB_HELP = ("Gradebook: a SQLite file (created if missing) or a URL such as "
           "postgresql://user@host/db. Default: $GRADER_DB, else gradebook.db here.")


def db_option(f):
    return click.option("--db", "db", envvar="GRADER_DB", default="gradebook.db", show_default=True,
                        metavar="URL", help=DB_HELP)(f)


def executor_options(f):
    f = click.option("--scheduler", metavar="ADDRESS",
                     help="Grade on this Dask distributed cluster (tcp://HOST:PORT) instead of locally.")(f)
    f = click.option("--workers", type=click.IntRange(1, 256), default=2, show_default=True,
                     help="Local worker processes (ignored with --scheduler).")(f)
    f = click.option("--progress/--no-progress", default=None,
                     help="Progress bar (default: when stderr is a terminal).")(f)
    return f


def _run(fn, *args, **kwargs):
    from grader.batch import BatchError
    try:
        return fn(*args, **kwargs)
    except BatchError as exc:
        usage_error(str(exc))
    except KeyboardInterrupt:
        click.echo("interrupted: the grades recorded so far are kept; run the same command to finish",
                   err=True)
        sys.exit(130)


@main.command()
@click.argument("exercise")
@click.argument("source", type=click.Path(path_type=Path))
@db_option
@executor_options
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write the class report (class.html), grades.csv and one JSON grade per learner here.")
@click.option("--force", is_flag=True, help="Regrade every submission, even those already graded.")
@click.option("--lang", type=click.Choice(["en", "zh-TW"]), default="en", show_default=True)
def batch(exercise, source: Path, db, workers, scheduler, progress, out, force, lang):
    """Grade a class: every learner's submission for EXERCISE in SOURCE, into the gradebook.

    SOURCE is a folder or a zip archive: one sub-folder, file or zip per learner, or a Canvas,
    Moodle or Gradescope submissions download (see grader/sources.py). Only what is new or
    changed since the last run is graded; a batch that was stopped is finished by running it again.
    """
    from grader.batch import run_batch
    ex = get_exercise(exercise)
    tally = _run(run_batch, ex.id, source, db, workers=workers, scheduler=scheduler, out=out, force=force,
                 lang=lang, progress=progress, echo=click.echo)
    sys.exit(EXIT_FAIL if tally.errors else EXIT_PASS)


@main.command()
@click.argument("exercise")
@db_option
@executor_options
@click.option("--force", is_flag=True, help="Regrade even submissions already graded against this version.")
def regrade(exercise, db, workers, scheduler, progress, force):
    """Regrade every stored submission of EXERCISE against its current version; list changed scores."""
    from grader.batch import regrade as run_regrade
    ex = get_exercise(exercise)
    tally, changes = _run(run_regrade, ex.id, db, workers=workers, scheduler=scheduler, force=force,
                          progress=progress, echo=click.echo)
    if not changes:
        click.echo("no score changed")
    else:
        click.echo(f"{len(changes)} score{'s' if len(changes) != 1 else ''} changed:")
        width = max(len(c.learner) for c in changes)
        for c in sorted(changes, key=lambda c: c.learner):
            verdict = ("" if c.old_passed == c.new_passed else
                       "  now passes" if c.new_passed else "  no longer passes")
            older = "" if c.current else "  (an older submission)"
            click.echo(f"  {c.learner:{width}}  {c.old_score:g} -> {c.new_score:g} / {c.max_score:g}  "
                       f"({c.new_score - c.old_score:+g}){verdict}{older}"
                       + (f"  {c.name}" if c.name else ""))
    sys.exit(EXIT_FAIL if tally.errors else EXIT_PASS)


@main.group()
def gradebook():
    """Read the gradebook: export every current grade, or show one learner."""


def _open(db):
    from grader.store import Gradebook, StoreError
    try:
        return Gradebook(db)
    except StoreError as exc:
        usage_error(str(exc))


EXPORT_COLUMNS = ("learner", "name", "email", "exercise", "score", "max_score", "passed", "status",
                  "error_kind", "failed_checks", "diagnosis", "late", "graded_at", "exercise_version",
                  "submission", "origin", "isolation", "grader_version")


def export_row(c) -> dict:
    g = c.grade
    return {"learner": c.learner, "name": c.name or "", "email": c.email or "", "exercise": c.exercise,
            "score": g.score, "max_score": g.max_score, "passed": g.passed, "status": c.status,
            "error_kind": g.error.kind if g.error else "",
            "failed_checks": " ".join(ch.id for ch in g.checks if not ch.passed),
            "diagnosis": " ".join(sorted({d.mutant or d.rule for d in g.diagnosis})),
            "late": c.late, "graded_at": c.graded_at.isoformat() if c.graded_at else "",
            "exercise_version": c.version[:12], "submission": c.digest[:12], "origin": c.origin,
            "isolation": g.isolation, "grader_version": g.grader_version}


def _csv_cell(value):
    """No formula injection: a learner-controlled cell never starts like a spreadsheet formula."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@gradebook.command("export")
@db_option
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("--exercise", help="Only this exercise.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
def gradebook_export(db, fmt, exercise, out):
    """Every learner's current grade per exercise (the latest grade of their latest submission)."""
    if exercise:
        exercise = get_exercise(exercise).id
    gb = _open(db)
    try:
        current = gb.current_grades(exercise)
    finally:
        gb.close()
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for c in current:
            writer.writerow({k: _csv_cell(v) for k, v in export_row(c).items()})
        text = buf.getvalue()
    else:
        text = json.dumps([{**export_row(c), "exercise_version": c.version, "submission": c.digest,
                            "grade": c.grade.model_dump(mode="json")} for c in current],
                          ensure_ascii=False, indent=2) + "\n"
    if out:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {len(current)} grades to {out}", err=True)
    else:
        click.echo(text, nl=False)


def _clean(text, limit=400) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return text if len(text) <= limit else text[:limit] + " [cut]"


@gradebook.command("show")
@click.argument("learner")
@db_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gradebook_show(learner, db, fmt):
    """One learner: their submissions, every grade run, and the failing checks of the current grades."""
    gb = _open(db)
    try:
        info = gb.learner(learner)
        current = gb.current_grades(learner=learner) if info else []
    finally:
        gb.close()
    if info is None:
        usage_error(f"LEARNER: no learner {learner!r} in the gradebook")
    if fmt == "json":
        data = {**info, "current": [{**export_row(c), "grade": c.grade.model_dump(mode="json")} for c in current]}
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return
    click.echo(f"learner {_clean(info['learner'])}" + (f"  {_clean(info['name'])}" if info["name"] else "")
               + (f"  <{_clean(info['email'])}>" if info["email"] else ""))
    for c in current:
        g = c.grade
        click.echo(f"\n{c.exercise}: {'PASSED' if g.passed else 'NOT PASSED'}  {g.score:g} / {g.max_score:g}"
                   f"  (version {c.version[:12]}, submission {c.digest[:12]}"
                   f"{', late' if c.late else ''}, graded {c.graded_at:%Y-%m-%d %H:%M} UTC)")
        if g.error:
            click.echo(f"  error ({g.error.kind}): {_clean(g.error.message)}")
        for ch in g.checks:
            if not ch.passed:
                click.echo(f"  FAIL {ch.id} [{ch.rule}, day {ch.day}] {ch.points:g}/{ch.max_points:g}: "
                           f"{_clean(ch.message, 200)}")
        for d in g.diagnosis:
            click.echo(f"  diagnosis: {d.rule} (day {d.day}){f' ({d.mutant})' if d.mutant else ''}: "
                       f"{_clean(d.message, 200)}")
    click.echo("\nsubmissions and grade runs:")
    for s in info["submissions"]:
        click.echo(f"  {s['exercise']} submission {s['digest'][:12]}{' (current)' if s['current'] else ''} "
                   f"from {_clean(s['origin'], 80) or '?'} [{s['layout']}]: "
                   f"{', '.join(f'{n} ({size} B)' for n, size in s['files'].items()) or 'no files'}")
        if s["problem"]:
            click.echo(f"    problem: {_clean(s['problem'])}")
        for r in s["runs"]:
            when = f"{r['finished_at']:%Y-%m-%d %H:%M:%S}" if r["finished_at"] else "?"
            click.echo(f"    run {r['id']}: {when}  version {r['version'][:12]}  attempt {r['attempt']}  "
                       f"{r['status']:10} {r['score']:g}/{r['max_score']:g}"
                       f"{'  ' + r['error_kind'] if r['error_kind'] else ''}  ({r['isolation']}, "
                       f"{r['duration_s']:.2f} s, {_clean(r['worker'], 60)})")
