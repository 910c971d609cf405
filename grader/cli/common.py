"""What every command shares: exit codes, usage errors, the exercise argument, --lang and --db.

Nothing here imports torch or SQLAlchemy; commands import those when they run, so `grader --help`
and `grader grade` on a quiz stay fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click

from grader.errors import EXIT_FAIL, EXIT_PASS, EXIT_USAGE
from grader.limits import MESSAGE_BYTES
from grader.locale import LANGS, lang_from_env
from grader.text import terminal

__all__ = [
    "EXIT_FAIL",
    "EXIT_PASS",
    "EXIT_USAGE",
    "db_option",
    "echo",
    "format_option",
    "get_exercise",
    "lang_option",
    "open_gradebook",
    "usage_error",
    "write_out",
]


def echo(text="", *, err: bool = False, limit: int = MESSAGE_BYTES) -> None:
    """click.echo for text that carries data (learner ids, file and member names, messages):
    through grader.text.terminal, so no control character or escape sequence (OSC title or
    clipboard, CSI, a bare CR, a bidi override) reaches the terminal raw. Every echo of data in
    the CLI goes through here; a rendered report is already made so (reports/view.py)."""
    click.echo(terminal(text, limit), err=err)


def usage_error(message: str) -> NoReturn:
    """Exit 2 with `error: MESSAGE` on stderr (click's own UsageError and BadParameter exit 2 too)."""
    echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def get_exercise(exercise_id: str):
    from grader.catalog.exercises import UnknownExercise, load_exercise

    try:
        return load_exercise(exercise_id)
    except UnknownExercise as exc:
        usage_error(f"EXERCISE: {exc}")


def _lang_default(ctx, param, value):
    return value or lang_from_env()


def format_option(help: str, choices=None):
    """--format, default text: one of `choices`, else of the report formats every renderer shares
    (reports.render.FORMATS)."""
    if choices is None:
        from reports.render import FORMATS as choices

    return click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default="text", show_default=True, help=help
    )


def lang_option(f):
    """--lang en|zh-TW, defaulting from the locale (LANGUAGE, LC_ALL, LC_MESSAGES, LANG) as gettext does.
    The command always receives a language, never None."""
    return click.option(
        "--lang",
        type=click.Choice(list(LANGS)),
        default=None,
        callback=_lang_default,
        help="Language of the reports: en or zh-TW [default: from LANGUAGE/LC_ALL/LC_MESSAGES/LANG].",
    )(f)


def write_out(out: Path, text: str) -> None:
    """Write a report to --out, an unwritable path being a usage error."""
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        usage_error(f"--out: cannot write {out}: {exc.strerror or exc}")


# -- the gradebook --------------------------------------------------------------------------------

DB_HELP = (
    "Gradebook: a SQLite file or a URL such as postgresql://user@host/db "
    "(`grader batch` creates a missing SQLite file; the other commands require it). "
    "Default: $GRADER_DB, else gradebook.db here."
)


def db_option(f):
    return click.option(
        "--db",
        "db",
        envvar="GRADER_DB",
        default="gradebook.db",
        show_default=True,
        metavar="URL",
        help=DB_HELP,
    )(f)


def open_gradebook(db: str, *, create: bool = False):
    """The gradebook at `db`; a bad one is a usage error. Without `create`, a SQLite file that does
    not exist is one too, and nothing is created (no file, no -wal or -shm)."""
    from grader.store import Gradebook, StoreError

    try:
        return Gradebook(db, create=create)
    except StoreError as exc:
        usage_error(str(exc))


# -- the course policy --------------------------------------------------------------------------


def course_option(f):
    """--course course.toml, as `grader serve --course`: which submission counts, the late penalty."""
    return click.option(
        "--course",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The course policy (course.toml): which submission counts and what lateness costs. "
        "Without it the latest submission seen counts, with no late penalty.",
    )(f)


def load_course(course: Path | None):
    """The CoursePolicy of --course (None without it); a missing or malformed file is exit 2."""
    if course is None:
        return None
    from grader.catalog.exercises import all_exercises
    from grader.errors import GraderError
    from grader.policy.course import load_policy

    if not course.is_file():
        usage_error(f"--course: {course} does not exist")
    try:
        return load_policy(course, [e.id for e in all_exercises()])
    except GraderError as exc:
        usage_error(f"--course: {exc}")


def roster_options(f):
    """--roster FILE and --missing blank|zero, for the commands that publish an exercise."""
    f = click.option(
        "--missing",
        type=click.Choice(["blank", "zero"]),
        default="blank",
        show_default=True,
        help="With --roster: how a learner on it without a submission is scored in the class "
        "report and the LMS imports (blank: left ungraded, in no statistic; zero: a 0).",
    )(f)
    f = click.option(
        "--roster",
        type=click.Path(dir_okay=False, path_type=Path),
        help="A Canvas gradebook export or Moodle grading worksheet, optionally with a Language "
        "column: the learners' names, emails and report languages, Canvas' SIS and Section "
        "columns, and every learner on it accounted for (--missing). LMS test accounts are skipped.",
    )(f)
    return f


def read_roster_option(roster: Path | None):
    """The learners of --roster (None without one), its LMS test accounts said and left out;
    a malformed roster is exit 2."""
    if roster is None:
        return None
    from grader.errors import UsageError
    from grader.policy.roster import read_roster_accounts

    try:
        rows, tests = read_roster_accounts(roster)
    except UsageError as exc:
        usage_error(f"--roster: {exc}")
    if tests:
        echo(
            f"--roster: skipped {len(tests)} LMS test account{'s' if len(tests) != 1 else ''} "
            "(not a learner): " + ", ".join(f"{r.name} ({r.learner})" for r in tests[:5])
        )
    return rows
