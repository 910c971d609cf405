"""`grader gradebook`: read the gradebook (export, show, audit), correct it (override, remove,
restore, choose: each recorded in the audit with its reason and who did it), and publish an
exercise's feedback and LMS import files (recorded in the audit too), and an overview of the
course across exercises.

All require the gradebook to exist (a missing SQLite file is exit 2, and none is created).
Grades are rendered by the same renderers as `grader grade` (reports.render); CSV is written
only by reports/gradebook.py (the LMS import files' columns are reports/lms.py's).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.cli.common import (
    EXIT_PASS,
    course_option,
    db_option,
    echo,
    format_option,
    get_exercise,
    lang_option,
    load_course,
    open_gradebook,
    read_roster_option,
    roster_options,
    usage_error,
    write_out,
)
from grader.policy import clock
from grader.text import terminal


@click.group()
def gradebook():
    """Read the gradebook (export, show, audit) or correct it (override, remove, restore, choose)."""


@gradebook.command("export")
@db_option
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("--exercise", help="Only this exercise.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@course_option
def gradebook_export(db, fmt, exercise, out, course):
    """Every learner's current grade per exercise: the latest grade of the submission that counts
    (by --course, else the latest seen), its late penalty and any override applied, with the
    graded score, the override's score, reason and author, and the late days and penalty beside
    it. Removed learners and submissions are left out."""
    from reports.gradebook import export_row, render_export_csv

    if exercise:
        exercise = get_exercise(exercise).id
    policy = load_course(course)
    gb = open_gradebook(db)
    try:
        current = gb.current_grades(exercise, policy=policy)
    finally:
        gb.close()
    if fmt == "csv":
        text = render_export_csv(current)  # every cell `shown` and formula-guarded
    else:
        text = as_json(
            [
                {
                    **export_row(c),
                    "exercise_version": c.version,
                    "submission": c.digest,
                    "grade": c.grade.model_dump(mode="json"),
                }
                for c in current
            ]
        )
    if out:
        write_out(out, text)
        echo(f"wrote {len(current)} grades to {out}", err=True)
    else:
        click.echo(text, nl=False)


def as_json(data) -> str:
    """Data as the JSON every report writes (reports.jsonfmt): no NaN tokens, and every control
    or invisible character a JSON escape, so it can go to a terminal and reads back the same."""
    from reports.jsonfmt import dumps, strict

    return dumps(strict(data))


def _clean(text, limit=400) -> str:
    return terminal(text, limit)


@gradebook.command("show")
@click.argument("learner")
@db_option
@click.option("--exercise", help="Only this exercise's grade (and, in text, its history).")
@format_option(
    "text (history, then the reports), or one grade as json, html, markdown, junit, gradescope or csv."
)
@click.option(
    "--history",
    is_flag=True,
    help="With --format json: the learner's whole record (submissions, every grade run, "
    "current grades) instead of one grade.",
)
@lang_option
@click.option(
    "--color/--no-color",
    default=None,
    help="Colour the text report [default: only when writing to a terminal].",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
@course_option
def gradebook_show(learner, db, exercise, fmt, history, lang, color, out, course):
    """LEARNER's current grades, rendered as `grader grade` renders a grade.

    \b
    text (the default): who the learner is, a line per current grade, their submissions with every
      grade run (for instructors, in English), then the report of each current grade in --lang.
    any other format: one grade, the learner's only current grade or, with --exercise, that
      exercise's; a learner with current grades for several exercises needs --exercise (exit 2,
      naming them).
    --format json --history: the learner's record as data instead (learner, name, email,
      submissions with their runs, and `current`: each current grade).

    Exit 0 when shown (passed or not); 2 for an unknown learner, an exercise the learner has no
    current grade for, or a gradebook that does not exist.
    """
    if history and fmt != "json":
        usage_error("--history goes with --format json (the text format always shows the history)")
    policy = load_course(course)
    gb = open_gradebook(db)
    try:
        info = gb.learner(learner)
        current = gb.current_grades(learner=learner, policy=policy) if info else []
    finally:
        gb.close()
    if info is None:
        usage_error(f"LEARNER: no learner {learner!r} in the gradebook")
    graded = [c.exercise for c in current]
    if exercise is not None:
        if exercise not in graded:
            usage_error(
                f"--exercise: learner {learner!r} has no current grade for {exercise!r}; "
                + _their_grades(graded)
            )
        current = [c for c in current if c.exercise == exercise]
        info = {**info, "submissions": [s for s in info["submissions"] if s["exercise"] == exercise]}
    if color is None:
        color = out is None and sys.stdout.isatty()
    color = bool(color) and fmt == "text"

    if fmt == "json" and history:
        from reports.gradebook import export_row

        text = as_json(
            {
                **info,
                "current": [{**export_row(c), "grade": c.grade.model_dump(mode="json")} for c in current],
            }
        )
    elif fmt == "text":
        text = _overview(info, current, lang, color, policy.zone if policy else None)
    else:
        if len(current) != 1:
            usage_error(
                f"LEARNER: learner {learner!r} has "
                + (
                    f"current grades for {len(current)} exercises ({', '.join(graded)}); "
                    "choose one with --exercise"
                    if current
                    else "no current grade"
                )
            )
        from reports import render

        text = render(current[0].grade, fmt, lang)
    if out:
        write_out(out, text)
        echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False, color=color)
    sys.exit(EXIT_PASS)


def _their_grades(exercises: list[str]) -> str:
    return f"their graded exercises: {', '.join(exercises)}" if exercises else "they have no current grade"


def _overview(info: dict, current: list, lang: str, color: bool, zone=None) -> str:
    """The instructor's view: the learner, their current grades, every submission and grade run,
    then the report of each current grade as `grader grade` prints it."""
    from reports import render

    lines = [
        f"learner {_clean(info['learner'])}"
        + (f"  {_clean(info['name'])}" if info["name"] else "")
        + (f"  <{_clean(info['email'])}>" if info["email"] else "")
        + (f"  (removed {clock.shown(info['removed_at'], zone)})" if info["removed_at"] else "")
    ]
    for c in current:
        g = c.grade
        when = f", graded {clock.shown(c.graded_at, zone)}" if c.graded_at else ""
        verdict = "PASSED" if g.passed else "NOT PASSED"
        lines.append(
            f"  {c.exercise}: {verdict}  {g.score:g} / {g.max_score:g}"
            f"  (version {c.version[:12]}, submission {c.digest[:12]}"
            f"{', late' if c.late else ''}{when})"
        )
        for a in g.adjustments:
            who = f" by {_clean(a.author, 80)}" if a.author else ""
            lines.append(f"    {a.kind}{who}: {a.before:g} -> {a.after:g}  ({_clean(a.reason)})")
    if not current:
        lines.append("  no current grade")
    lines.append("\nsubmissions and grade runs:")
    for s in info["submissions"]:
        files = ", ".join(f"{_clean(n, 80)} ({size} B)" for n, size in s["files"].items())
        marks = "".join(
            [" (current)" if s["current"] else "", " (chosen)" if s["chosen"] else ""]
            + [" (removed)" if s["removed_at"] else ""]
        )
        lines.append(
            f"  {s['exercise']} submission {s['id']} {s['digest'][:12]}{marks} "
            f"from {_clean(s['origin'], 80) or '?'} [{s['layout']}]: {files or 'no files'}"
        )
        if s["problem"]:
            lines.append(f"    problem: {_clean(s['problem'])}")
        for r in s["runs"]:
            when = clock.shown(r["finished_at"], zone, seconds=True) if r["finished_at"] else "?"
            lines.append(
                f"    run {r['id']}: {when}  version {r['version'][:12]}  attempt {r['attempt']}  "
                f"{r['status']:10} {r['score']:g}/{r['max_score']:g}"
                f"{'  ' + r['error_kind'] if r['error_kind'] else ''}  ({r['isolation']}, "
                f"{r['duration_s']:.2f} s, {_clean(r['worker'], 60)})"
            )
    text = "\n".join(lines) + "\n"
    for c in current:
        text += "\n" + render(c.grade, "text", lang, color=color)
    return text


@gradebook.command("publish")
@click.argument("exercise")
@db_option
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the learners' reports, the LMS import files and published.json here.",
)
@lang_option
@course_option
@roster_options
@click.option(
    "--canvas-assignment",
    metavar="'NAME (ID)'",
    help="The Canvas assignment the grades are for, as Canvas titles its column: "
    "'Day 49 data (12345)' [default: the exercise's title, matched by title].",
)
def gradebook_publish(exercise, db, out, lang, course, roster, missing, canvas_assignment):
    """Publish EXERCISE's feedback and grades from the gradebook into OUT.

    \b
    class.html, grades.csv        the class report (names from the gradebook or --roster)
    learners/<name>.html and .md  each learner's report, in their roster language or --lang
    canvas-import.csv             for Canvas: Grades > Import
    moodle-import.csv             for Moodle: Grades > Import > CSV file (matched by email)
    moodle-worksheet.csv          for Moodle: the assignment's Upload grading worksheet
    published.json                learner -> language, score and files

    The scores are the final ones (late penalties by --course, overrides). Removed learners are
    left out. With --roster, each learner on it without a submission is a "no submission" row,
    blank or 0 by --missing. Exit 0 when published; 2 for an unknown exercise, a gradebook that
    does not exist, a malformed course.toml or roster, or an exercise the gradebook has no grade of.
    """
    from grader.course.publish import publish
    from grader.errors import UsageError

    ex = get_exercise(exercise)
    policy = load_course(course)
    rows = read_roster_option(roster)
    gb = open_gradebook(db)
    try:
        if not gb.current_grades(ex.id):
            usage_error(f"EXERCISE: the gradebook {db} holds no grade of {ex.id}")
        try:
            lines = publish(
                out, gb, ex, lang, policy, roster=rows, canvas_assignment=canvas_assignment, missing=missing
            )
        except UsageError as exc:
            usage_error(str(exc))
    finally:
        gb.close()
    for line in lines:
        echo(line)
    sys.exit(EXIT_PASS)


# -- corrections: override, remove, restore, choose, and the audit of them ---------------------------
# (each its own function, apart from the readers above and from `publish`)


def _correct(db: str, change):
    """Run one correction on the gradebook; what names a missing learner, submission or an empty
    reason is exit 2 naming the argument, and nothing is stored."""
    from grader.store.gradebook import GradebookInputError

    gb = open_gradebook(db)
    try:
        return change(gb)
    except GradebookInputError as exc:
        usage_error(str(exc))
    finally:
        gb.close()


def _reason_option(f):
    return click.option("--reason", default=None, help="Why (required, recorded in the audit).")(f)


def _author_option(f):
    return click.option("--author", default=None, help="Who does it [default: the OS user].")(f)


def _author(given: str | None) -> str:
    """--author as given, else who runs the command (the gradebook's rule, with SQLAlchemy)."""
    from grader.store.gradebook import os_user

    return given or os_user()


def _need_reason(reason: str | None) -> str:
    if reason is None or not reason.strip():
        usage_error("--reason: a reason is required and may not be empty")
    return reason


@gradebook.command("override")
@click.argument("learner")
@click.argument("exercise")
@db_option
@click.option("--score", type=float, help="The score that counts, 0 to the exercise's points.")
@_reason_option
@_author_option
@click.option("--revoke", is_flag=True, help="Revoke the newest override instead.")
def gradebook_override(learner, exercise, db, score, reason, author, revoke):
    """Give LEARNER's EXERCISE a score by hand, with a reason (or --revoke the newest override).

    The newest override not revoked is the score that counts, over whatever grade run is current:
    it survives `grader regrade` and `grader batch --force`. Every export and report shows it with
    its reason and author. Exit 2: an unknown learner or exercise, a score out of range, no reason."""
    ex = get_exercise(exercise)
    author = _author(author)
    if revoke:
        if score is not None:
            usage_error("--score: not with --revoke")
        now = _correct(db, lambda gb: gb.revoke_override(learner, ex.id, author))
        applies = f"the override of {now.score:g} ({now.reason}) applies again" if now else ""
        echo(f"revoked the newest override of {learner} {ex.id}; {applies or 'the graded score counts'}")
        return
    if score is None:
        usage_error("--score: required (or --revoke)")
    if not 0 <= score <= ex.points:
        usage_error(f"--score: {score:g} is out of range: {ex.id} is worth 0 to {ex.points:g} points")
    reason = _need_reason(reason)
    _correct(db, lambda gb: gb.override(learner, ex.id, score, reason, author))
    echo(f"{learner} {ex.id}: {score:g} / {ex.points:g} by {author}, from now and over every regrade")


def _removal(restore: bool):
    verb = "restore" if restore else "remove"

    @click.argument("learner")
    @db_option
    @click.option("--exercise", help=f"Only {'the' if restore else 'their'} submissions of this exercise.")
    @click.option("--submission", type=int, help="Only this submission (its id, as `gradebook show` lists).")
    @_reason_option
    @_author_option
    def command(learner, db, exercise, submission, reason, author):
        if exercise is not None and submission is not None:
            usage_error("--exercise and --submission: give one")
        ex = get_exercise(exercise).id if exercise else None
        reason = _need_reason(reason)
        author = _author(author)
        n = _correct(
            db,
            lambda gb: gb.remove(
                learner, reason, author, exercise=ex, submission=submission, restore=restore
            ),
        )
        what = f"submission {submission}" if submission else f"submissions of {ex}" if ex else "learner"
        echo(f"{verb}d {learner} ({what}): {n} changed")

    command.__doc__ = (
        "Remove LEARNER, their submissions of an exercise, or one submission from the gradebook.\n\n"
        "Removed rows stay (nothing is deleted) but are left out of current grades, exports, class "
        "reports and publications; `grader gradebook restore` undoes it."
        if not restore
        else "Undo a `grader gradebook remove`: the learner, or the submissions the newest removal "
        "of that exercise took out, or one submission, count again exactly as before."
    )
    return gradebook.command(verb)(command)


gradebook_remove = _removal(restore=False)
gradebook_restore = _removal(restore=True)


@gradebook.command("choose")
@click.argument("learner")
@click.argument("exercise")
@db_option
@click.option("--submission", type=int, required=True, help="The submission that counts (its id).")
@_author_option
def gradebook_choose(learner, exercise, db, submission, author):
    """Make one of LEARNER's submissions of EXERCISE the chosen one: it counts where course.toml
    says `counts = "chosen"` (and, without --course, over the latest seen)."""
    ex = get_exercise(exercise).id
    _correct(db, lambda gb: gb.choose(learner, ex, submission, _author(author)))
    echo(f"{learner} {ex}: submission {submission} is the chosen one")


@gradebook.command("audit")
@db_option
@click.option("--learner", help="Only this learner's entries.")
@click.option("--exercise", help="Only this exercise's entries.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def gradebook_audit(db, learner, exercise, fmt):
    """Every change made to the gradebook, oldest first: overrides, revokes, removals and restores,
    chosen submissions, batches and regrades, with who, when and why."""
    gb = open_gradebook(db)
    try:
        entries = gb.audit_log(learner, exercise)
    finally:
        gb.close()
    if fmt == "json":
        click.echo(as_json([{**e, "at": e["at"].isoformat()} for e in entries]), nl=False)
        return
    if not entries:
        echo("no audit entries")
    for e in entries:
        details = ", ".join(f"{k}={v}" for k, v in e["details"].items())
        echo(
            f"{clock.shown(e['at'], seconds=True)}  {e['actor']}  {e['action']}"
            + (f"  {e['learner']}" if e["learner"] else "")
            + (f"  {e['exercise']}" if e["exercise"] else "")
            + (f"  ({details})" if details else "")
        )


@gradebook.command("overview")
@db_option
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The overview page to write (e.g. ROOT/index.html).",
)
@lang_option
@course_option
def gradebook_overview(db, out, lang, course):
    """A course overview across exercises: one HTML table, a row per exercise in the gradebook.

    \b
    Each row: learners with a current grade, mean score, pass rate, late count, learners in
    possible copies (as the class report finds them, starter code excluded), and a link to
    that exercise's class report at <exercise>/class.html, relative to the page. So publish as
      grader batch EX1 SOURCE1 --out ROOT/EX1 ...   (ROOT/EX1/class.html, items.csv, ...)
      grader gradebook overview --out ROOT/index.html
    Exit 0 when written; 2 for a gradebook that does not exist or an unwritable --out.
    """
    from grader.catalog.exercises import UnknownExercise, load_exercise
    from grader.catalog.starters import starter_files
    from reports.class_report import class_entries, exercise_row, render_overview_html

    policy = load_course(course)
    gb = open_gradebook(db)
    try:
        current = gb.current_grades(policy=policy)
        rows = []
        for exercise in sorted({c.exercise for c in current}):
            mine = [c for c in current if c.exercise == exercise]
            try:
                starter = starter_files(load_exercise(exercise))
            except (UnknownExercise, OSError):  # graded once, no longer installed: no boilerplate
                starter = {}
            entries = class_entries(mine, gb.submissions(exercise, [c.submission_id for c in mine]))
            rows.append(exercise_row(exercise, entries, starter, lang))
    finally:
        gb.close()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        usage_error(f"--out: cannot make {out.parent}: {exc.strerror or exc}")
    write_out(out, render_overview_html(rows, lang))
    echo(f"wrote {out}: {len(rows)} exercises", err=True)
    sys.exit(EXIT_PASS)
