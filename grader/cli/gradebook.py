"""`grader gradebook export|show|publish`: read the gradebook (publish records a roster and its
publication in it).

All require the gradebook to exist (a missing SQLite file is exit 2, and none is created).
Grades are rendered by the same renderers as `grader grade` (reports.render); CSV is written
only by reports/gradebook.py, and the LMS import files by reports/lms.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.cli.common import (
    EXIT_PASS,
    db_option,
    echo,
    format_option,
    get_exercise,
    lang_option,
    open_gradebook,
    usage_error,
    write_out,
)
from grader.text import terminal


@click.group()
def gradebook():
    """Read the gradebook: export every current grade, or show one learner's."""


@gradebook.command("export")
@db_option
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("--exercise", help="Only this exercise.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here instead of stdout.")
def gradebook_export(db, fmt, exercise, out):
    """Every learner's current grade per exercise (the latest grade of their latest submission)."""
    from reports.gradebook import export_row, render_export_csv

    if exercise:
        exercise = get_exercise(exercise).id
    gb = open_gradebook(db)
    try:
        current = gb.current_grades(exercise)
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
def gradebook_show(learner, db, exercise, fmt, history, lang, color, out):
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
    gb = open_gradebook(db)
    try:
        info = gb.learner(learner)
        current = gb.current_grades(learner=learner) if info else []
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
        text = _overview(info, current, lang, color)
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


def _overview(info: dict, current: list, lang: str, color: bool) -> str:
    """The instructor's view: the learner, their current grades, every submission and grade run,
    then the report of each current grade as `grader grade` prints it."""
    from reports import render

    lines = [
        f"learner {_clean(info['learner'])}"
        + (f"  {_clean(info['name'])}" if info["name"] else "")
        + (f"  <{_clean(info['email'])}>" if info["email"] else "")
    ]
    for c in current:
        g = c.grade
        when = f", graded {c.graded_at:%Y-%m-%d %H:%M} UTC" if c.graded_at else ""
        verdict = "PASSED" if g.passed else "NOT PASSED"
        lines.append(
            f"  {c.exercise}: {verdict}  {g.score:g} / {g.max_score:g}"
            f"  (version {c.version[:12]}, submission {c.digest[:12]}"
            f"{', late' if c.late else ''}{when})"
        )
    if not current:
        lines.append("  no current grade")
    lines.append("\nsubmissions and grade runs:")
    for s in info["submissions"]:
        files = ", ".join(f"{_clean(n, 80)} ({size} B)" for n, size in s["files"].items())
        lines.append(
            f"  {s['exercise']} submission {s['digest'][:12]}{' (current)' if s['current'] else ''} "
            f"from {_clean(s['origin'], 80) or '?'} [{s['layout']}]: {files or 'no files'}"
        )
        if s["problem"]:
            lines.append(f"    problem: {_clean(s['problem'])}")
        for r in s["runs"]:
            when = f"{r['finished_at']:%Y-%m-%d %H:%M:%S}" if r["finished_at"] else "?"
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
@click.option(
    "--course",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The course policy (course.toml): its late penalties apply to the published scores.",
)
@click.option(
    "--roster",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A Canvas gradebook export or Moodle grading worksheet, optionally with a Language "
    "column: records the names, emails and report languages of the learners in the gradebook, "
    "and fills Canvas' SIS and Section columns.",
)
@click.option(
    "--canvas-assignment",
    metavar="'NAME (ID)'",
    help="The Canvas assignment the grades are for, as Canvas titles its column: "
    "'Day 49 data (12345)' [default: the exercise's title, matched by title].",
)
def gradebook_publish(exercise, db, out, lang, course, roster, canvas_assignment):
    """Publish EXERCISE's feedback and grades from the gradebook into OUT.

    \b
    learners/<name>.html and .md  each learner's report, in their roster language or --lang
    canvas-import.csv             for Canvas: Grades > Import
    moodle-import.csv             for Moodle: Grades > Import > CSV file (matched by email)
    moodle-worksheet.csv          for Moodle: the assignment's Upload grading worksheet
    published.json                learner -> language, score and files

    The scores are the final ones (late penalties by --course, overrides). Removed learners are
    left out. Exit 0 when published; 2 for an unknown exercise, a gradebook that does not exist,
    a malformed course.toml or roster, or an exercise the gradebook has no grade of.
    """
    from grader.errors import UsageError
    from grader.publish import publish

    ex = get_exercise(exercise)
    policy = _policy(course, ex.id)
    rows = None
    if roster is not None:
        from grader.service.roster import read_roster

        try:
            rows = read_roster(roster)
        except UsageError as exc:
            usage_error(f"--roster: {exc}")
    gb = open_gradebook(db)
    try:
        if not gb.current_grades(ex.id):
            usage_error(f"EXERCISE: the gradebook {db} holds no grade of {ex.id}")
        try:
            lines = publish(out, gb, ex, lang, policy, roster=rows, canvas_assignment=canvas_assignment)
        except UsageError as exc:
            usage_error(str(exc))
    finally:
        gb.close()
    for line in lines:
        echo(line)
    sys.exit(EXIT_PASS)


def _policy(course: Path | None, exercise: str):
    """course.toml, checked against the course's exercises (None: no policy given)."""
    if course is None:
        return None
    from grader.errors import UsageError
    from grader.exercises import all_exercises
    from grader.service.policy import load_policy

    try:
        return load_policy(course, [e.id for e in all_exercises()] or [exercise])
    except UsageError as exc:
        usage_error(f"--course: {exc}")
