"""The student's commands: `grader login`, `submit`, `status`, `history`, `report` (and `grader
starter` from the course's server, which grader/cli/grade.py hands to `server_starter` here).

Light by design: click, httpx, pydantic and the grader's light modules (grader.client, .text,
.locale, .limits, .errors, .sources); nothing here imports torch or anything that grades.
The report goes to stdout, everything else (what was packed, progress, hints) to stderr, so
`grader submit EX PATH --wait --format json > grade.json` writes only the report. Exit codes:
0 passed, 1 graded but not passed, 2 usage or input error, 3 refused for now (closed, not open,
over the limit: the time of the next possible submission is said), 4 the server's side failed.
"""

from __future__ import annotations

import functools
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, echo, format_option, lang_option
from grader.client import show
from grader.client.errors import ClientError, Refused, ServerFailure
from grader.client.show import course_zone, hints, status_text
from grader.errors import GraderError
from grader.limits import LEARNER_FILE_BYTES, REPORT_BYTES, WAIT_SECONDS
from grader.locale import msg

REPORT_FORMATS = ("text", "json", "html", "markdown")


def insecure_option(f):
    return click.option(
        "--insecure",
        is_flag=True,
        help="Send the token over plain http:// to a host that is not this machine "
        "(anyone on the way can read it).",
    )(f)


def client_command(f):
    """Show a client error in the learner's language: `error: MESSAGE`, and for a refusal when
    the next submission is possible; exit with its code (2, 3 or 4)."""

    @functools.wraps(f)
    def run(*args, **kw):
        lang = kw.get("lang", "en")
        try:
            return f(*args, **kw)
        except GraderError as exc:
            message = getattr(exc, "message", None) or str(exc)
            echo(f"error: {show.say(message, lang)}", err=True)
            for hint in hints(exc):
                echo(show.say(hint, lang), err=True)
            sys.exit(exc.exit_code)

    return run


def connect(insecure: bool, lang: str = "en", server: str | None = None, api_class=None):
    """The Api (or `api_class`, a subclass: grader course's) of the logged-in server
    (GRADER_SERVER / GRADER_TOKEN override the login file)."""
    from grader.client.api import Api
    from grader.client.config import read_login

    login = read_login(server=server)
    if login.server is None:
        raise ClientError(msg("not logged in: run grader login --server URL first (or set GRADER_SERVER)"))
    if login.token is None:
        raise ClientError(
            msg("not logged in to {server}: run grader login --server {server}", server=login.server)
        )
    return (api_class or Api)(login.server, login.token, insecure=insecure, lang=lang)


# -- grader login ------------------------------------------------------------------------------


@click.command()
@click.option("--server", required=True, metavar="URL", help="The course's grading server, https://...")
@click.option("--token", metavar="TOKEN", help="Your access token [default: asked for, not echoed].")
@insecure_option
@lang_option
@client_command
def login(server, token, insecure, lang):
    """Check your token with the course's server and keep it (a 0600 file in your config folder)."""
    from grader.client.api import log_in

    def ask() -> str:
        return click.prompt(show.say(msg("Token"), lang), hide_input=True)

    echo(show.say(log_in(server, token, ask, insecure=insecure, lang=lang), lang))


# -- grader submit -----------------------------------------------------------------------------


@click.command()
@click.argument("exercise")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--wait", is_flag=True, help=f"Wait for the grade (at most {WAIT_SECONDS:g} s) and print the report."
)
@format_option("The report's format (with --wait).", REPORT_FORMATS)
@lang_option
@click.option(
    "--use-late-day", is_flag=True, help="Spend one of your late days on this submission, if it is late."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show what would be sent (files, sizes, digest, the notebook cells they come from) and "
    "send nothing.",
)
@insecure_option
@client_command
def submit(exercise, path: Path, wait, fmt, lang, use_late_day, dry_run, insecure):
    """Submit the learner files at PATH (a folder, one file, a notebook or a zip) for EXERCISE.

    The files are found as the grader finds them (a notebook's are assembled from its code
    cells); they, their sizes and their SHA-256 digest are shown before the upload. Files that
    would fail at once (a syntax error, a notebook's magic left in, a missing name) are refused
    here: nothing is sent and no submission spent. With --wait: the report as you may see it
    now; exit 0 passed, 1 not passed, 2 refused here, 3 refused for now, 4 a failure on the
    server's side."""
    from grader.client.api import graded, upload
    from grader.client.packing import pack

    with connect(insecure, lang) as api:
        info = api.exercise(exercise)
        packed = pack(info.exercise(), path)
        show_packed(packed, lang, err=not dry_run)
        if dry_run:
            echo(show.say(msg("dry run: nothing was sent"), lang))
            return
        sub = upload(api, exercise, packed.archive, use_late_day=use_late_day)
        for kind, line in show.uploaded_lines(sub, packed.digest, exercise, wait):
            echo(show.say(line, lang), err=kind != "next")  # stdout: what a script reads
        if not wait:
            return
        echo(show.say(msg("submission {id}: waiting for the grade", id=sub.id), lang), err=True)
        from grader.client.wait import wait_until_finished

        sub = wait_until_finished(
            lambda seconds: api.submission(sub.id, wait=seconds),
            sub,
            label=lambda s, elapsed: show.say(
                msg("{status} {seconds} s", status=status_text(s.status), seconds=int(elapsed)), lang
            ),
        )
        sub = graded(sub)
        print_report(api.report(sub.id, fmt, lang), fmt)
    sys.exit(EXIT_PASS if sub.passed else EXIT_FAIL)


def show_packed(packed, lang: str, err: bool = True) -> None:
    """What `grader submit` would send (show.packed_lines); when the files would fail at once,
    ClientError (exit 2): nothing is sent."""
    for line in show.packed_lines(packed, lang):
        echo(line, err=err)
    if packed.problems:
        raise ClientError(
            msg(
                "nothing was sent, and no submission spent: fix what is said above, then submit "
                "again (grader submit --dry-run checks without sending)"
            )
        )


def print_report(text: str, fmt: str) -> None:
    """The server's report: a text report always sanitised (it is for a terminal); the other
    formats byte for byte into a file or pipe, sanitised only when they reach a terminal."""
    if fmt == "text" or sys.stdout.isatty():
        echo(text.rstrip("\n"), limit=REPORT_BYTES)
    else:
        click.echo(text, nl=False)


# -- grader status, grader history -------------------------------------------------------------


def json_option(f):
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(("text", "json")),
        default="text",
        show_default=True,
        help="text: a table; json: the server's JSON.",
    )(f)


def print_json(data) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if sys.stdout.isatty():
        echo(text, limit=REPORT_BYTES)
    else:
        click.echo(text)


def zone_lines(moments, me, lang: str) -> None:
    """Under a table: the course's zone, where this machine's clock differs (stderr)."""
    course = me.course
    note = show.zone_note(moments, course.zone if course else None, course.timezone if course else "")
    if note is not None:
        echo(show.say(note, lang), err=True)


@click.command()
@click.argument("exercise", required=False)
@json_option
@lang_option
@insecure_option
@client_command
def status(exercise, fmt, lang, insecure):
    """Your exercises (or EXERCISE): deadlines, submissions, the one that counts and whether it was
    late, submissions left and when the next is possible, and your late days left."""
    with connect(insecure, lang) as api:
        if fmt == "json":
            print_json(api.raw("/status", **({"exercise": exercise} if exercise else {})))
            return
        rows = api.status(exercise)
        me = api.me()
    zone = me.course.zone if me.course else None
    headers = [
        msg("exercise"),
        msg("due"),
        msg("closes"),
        msg("submissions"),
        msg("counts"),
        msg("score"),
        msg("late"),
        msg("left"),
        msg("next submission"),
    ]
    echo(
        show.table(
            [show.say(h, lang) for h in headers],
            [
                [
                    r.exercise,
                    show.when(r.deadlines.due, zone),
                    show.when(r.deadlines.closes, zone),
                    r.submissions,
                    r.counted,
                    show.score(r.score, r.max_score),
                    counted_late(r, lang),
                    r.tokens_left,
                    show.when(r.next_submission_at, zone) if show.later(r.next_submission_at) else "-",
                ]
                for r in rows
            ],
        ),
        limit=REPORT_BYTES,
    )
    now = datetime.now(UTC)
    for r in rows:
        if r.tokens_left == 0 and r.next_submission_at is not None and show.later(r.next_submission_at):
            line = msg(
                "{exercise}: no submission left now; the next is possible at {when} (in {wait})",
                exercise=r.exercise,
                when=show.when_here(r.next_submission_at, zone),
                wait=show.wait_for(r.next_submission_at, now),
            )
            echo(show.say(line, lang), limit=REPORT_BYTES)
    bank = me.late_days
    if "left" in bank:
        echo(
            show.say(
                msg(
                    "late days left: {left} of {total} (spent only by grader submit --use-late-day)",
                    left=bank["left"],
                    total=bank.get("total", bank["left"]),
                ),
                lang,
            )
        )
    moments = [m for r in rows for m in (r.deadlines.due, r.deadlines.closes)]
    zone_lines(moments, me, lang)


def counted_late(row, lang: str) -> str:
    """Whether the submission that counts was late, and what it cost ("-": none counts yet)."""
    if row.counted is None:
        return "-"
    if row.late is None or row.late.minutes <= 0:
        return show.say(msg("on time"), lang)
    return late_text(row.late, 0, lang)


@click.command()
@click.argument("exercise")
@json_option
@lang_option
@insecure_option
@client_command
def history(exercise, fmt, lang, insecure):
    """Your submissions of EXERCISE, oldest first (* marks the one that counts)."""
    with connect(insecure, lang) as api:
        history = api.submissions(exercise)
        me = api.me() if fmt != "json" else None
    if not history.complete:
        echo(
            show.say(
                msg(
                    "only your first {count} submissions of {exercise} are listed",
                    count=len(history.items),
                    exercise=exercise,
                ),
                lang,
            ),
            err=True,
        )
    if fmt == "json" or me is None:  # the server's JSON of each, as it came: one list, however many pages
        print_json(history.raw)
        return
    zone = me.course.zone if me.course else None
    subs = history.items
    headers = [msg("submission"), msg("received"), msg("status"), msg("score"), msg("late"), msg("digest")]
    echo(
        show.table(
            [show.say(h, lang) for h in headers],
            [
                [
                    ("* " if s.counted else "  ") + str(s.id),
                    show.when(s.received_at, zone),
                    show.say(status_text(s.status), lang),
                    show.score(s.score, s.max_score),
                    late_text(s.late, s.late_days_spent, lang),
                    s.digest[:12],
                ]
                for s in subs
            ],
        ),
        limit=REPORT_BYTES,
    )
    zone_lines([s.received_at for s in subs], me, lang)


def late_text(late, spent: int, lang: str) -> str:
    """`1 d, -10%` (and the late days the submission spent), or "-" when it was on time."""
    if late is None or late.minutes <= 0:
        return "-"
    text = show.say(msg("{days} d, -{penalty:.0%}", days=late.days, penalty=late.penalty), lang)
    if spent:
        text += " " + show.say(msg("({n} late days spent)", n=spent), lang)
    return text


# -- grader report -----------------------------------------------------------------------------


@click.command()
@click.argument("target", required=False, metavar="[EXERCISE|SUBMISSION]")
@format_option("The report's format.", REPORT_FORMATS)
@lang_option
@insecure_option
@client_command
def report(target, fmt, lang, insecure):
    """The report of one of your submissions, as you may see it now: SUBMISSION (its id, as
    grader submit and grader history show it), else the latest graded submission of EXERCISE (or
    of any exercise). Exit 0 passed, 1 not passed, 3 not graded yet, 4 the server could not grade it."""
    with connect(insecure, lang) as api:
        zone = course_zone(api)
        sub = report_of(api, target, lang)
        echo(
            show.say(
                msg(
                    "submission {id} of {exercise}, received {when}",
                    id=sub.id,
                    exercise=sub.exercise or "-",
                    when=show.when_here(sub.received_at, zone) if sub.received_at else "-",
                ),
                lang,
            ),
            err=True,
        )
        print_report(api.report(sub.id, fmt, lang), fmt)
    sys.exit(EXIT_PASS if sub.passed else EXIT_FAIL)


def report_of(api, target: str | None, lang: str):
    """The submission whose report `grader report TARGET` prints: the one with that id, or the
    latest of an exercise (of any, without TARGET) that is graded; a newer one still waiting or
    that the server could not grade is said on stderr."""
    if target is not None and target.isascii() and target.isdigit():
        sub = api.submission(int(target))
        return finished(sub)
    if target is not None:
        api.exercise(target)  # an exercise the server does not have is said as such
    subs = api.latest(target)
    if not subs:
        raise ClientError(
            msg("no submission of {exercise} yet: grader submit {exercise} PATH", exercise=target)
            if target
            else msg("no submission yet: grader submit EXERCISE PATH")
        )
    graded = [s for s in subs if s.status == "graded"]
    if not graded:
        return finished(subs[0])
    if subs[0].id != graded[0].id:
        newer = subs[0]
        echo(
            show.say(
                msg(
                    "your latest submission {id} is {status}; this is the report of {shown}, "
                    "your latest graded one",
                    id=newer.id,
                    status=status_text(newer.status),
                    shown=graded[0].id,
                ),
                lang,
            ),
            err=True,
        )
    return graded[0]


def finished(sub):
    """`sub` if it is graded; else why it has no report: not yet (exit 3), or the server could
    not grade it (exit 4, never the learner's fault)."""
    if sub.status == "failed":
        raise ServerFailure(
            msg("the server could not grade submission {id}; it does not count against you", id=sub.id)
        )
    if sub.status != "graded":
        raise Refused(
            msg(
                "submission {id} is {status}: it has no report until it is graded; "
                "see it then with grader report {id}",
                id=sub.id,
                status=status_text(sub.status),
            ),
            code="not-graded",
        )
    return sub


# -- grader starter, from the course's server -----------------------------------------------------


def logged_in(lang: str = "en") -> bool:
    """Whether a server and a token for it are known (the login file, GRADER_SERVER/GRADER_TOKEN):
    `grader starter` then fetches the course's starter rather than the public sample's."""
    from grader.client.config import read_login

    login = read_login()
    return login.server is not None and login.token is not None


def server_starter(exercise: str, directory: Path, server: str | None, insecure: bool, lang: str) -> None:
    """`grader starter EXERCISE DIRECTORY` once logged in (or with --server URL): the starter as
    the course's server gives it to you (a quiz: your own variant). Existing files are never
    overwritten."""
    from grader.client.packing import unpack_starter

    with connect(insecure, lang, server=server) as api:
        info = api.exercise(exercise)
        files = unpack_starter(api.starter(exercise), info.files, LEARNER_FILE_BYTES)
    if not files:
        raise ServerFailure(
            msg("the server's starter for {exercise} holds none of its files", exercise=exercise)
        )
    for name in files:
        if (directory / name).exists() or (directory / name).is_symlink():
            raise ClientError(
                msg("DIRECTORY: {path} already exists; not overwriting it", path=str(directory / name))
            )
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
        echo(show.say(msg("wrote {path}", path=str(directory / name)), lang))
