"""The student's commands: `grader login`, `submit`, `status`, `history` (and `grader starter
--server`, which grader/cli/grade.py hands to `server_starter` here).

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
import uuid
from datetime import UTC, datetime
from pathlib import Path

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, echo, lang_option
from grader.client import show
from grader.client.errors import ClientError, Refused, ServerFailure
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


def hints(exc: GraderError) -> list:
    code = getattr(exc, "code", None)
    out = []
    retry_at = getattr(exc, "retry_at", None)
    if isinstance(exc, Refused | ServerFailure) and retry_at is not None:
        now = datetime.now(UTC)
        out.append(
            msg(
                "the next submission is possible at {when} (in {wait})",
                when=show.when(retry_at),
                wait=show.wait_for(retry_at, now),
            )
        )
    elif isinstance(exc, Refused) and code == "closed":
        out.append(msg("this exercise no longer takes submissions"))
    if code == "unauthorized":
        out.append(msg("log in again: grader login --server URL"))
    return out


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
    from grader.client.api import Api
    from grader.client.config import check_token, check_token_url, normalize_server, save_login

    server = normalize_server(server)
    check_token_url(server, insecure=insecure)  # before the token is even asked for
    if token is None:
        token = click.prompt(show.say(msg("Token"), lang), hide_input=True)
    token = check_token(token)
    with Api(server, token, insecure=insecure, lang=lang) as api:
        me = api.me()
    path = save_login(server, token)
    echo(
        show.say(
            msg(
                "logged in to {server} as {learner} ({role}); token kept in {path}",
                server=server,
                learner=me.learner,
                role=me.role,
                path=str(path),
            ),
            lang,
        )
    )


# -- grader submit -----------------------------------------------------------------------------


@click.command()
@click.argument("exercise")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--wait", is_flag=True, help=f"Wait for the grade (at most {WAIT_SECONDS:g} s) and print the report."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(REPORT_FORMATS),
    default="text",
    show_default=True,
    help="The report's format (with --wait).",
)
@lang_option
@click.option(
    "--use-late-day", is_flag=True, help="Spend one of your late days on this submission, if it is late."
)
@insecure_option
@client_command
def submit(exercise, path: Path, wait, fmt, lang, use_late_day, insecure):
    """Submit the learner files at PATH (a folder, one file, or a zip) for EXERCISE.

    The files are found as the grader finds them; they, their sizes and their SHA-256 digest are
    shown before the upload. With --wait: the report as you may see it now; exit 0 passed, 1 not
    passed, 3 refused for now, 4 a failure on the server's side."""
    from grader.client.packing import pack

    with connect(insecure, lang) as api:
        info = api.exercise(exercise)
        packed = pack(info.exercise(), path)
        for name in sorted(packed.files):
            echo(f"  {name}  {len(packed.files[name]):,} bytes", err=True)
        for warning in packed.warnings:
            echo(show.say(msg("warning: {warning}", warning=warning), lang), err=True)
        echo(show.say(msg("digest (SHA-256): {digest}", digest=packed.digest), lang), err=True)
        key = str(uuid.uuid4())  # one upload, however many times the network makes us send it
        sub = api.submit(exercise, packed.archive, key, use_late_day=use_late_day)
        if sub.repeat:  # nothing stored, nothing spent: the server answered with that submission
            echo(
                show.say(
                    msg(
                        "these files are the same as your latest submission {id} of {exercise}: "
                        "not stored again, and no submission or late day spent",
                        id=sub.id,
                        exercise=exercise,
                    ),
                    lang,
                ),
                err=True,
            )
        if sub.digest and sub.digest != packed.digest:
            echo(
                show.say(msg("warning: the server computed the digest {digest}", digest=sub.digest), lang),
                err=True,
            )
        if not wait:
            echo(
                show.say(
                    msg(
                        "submission {id}: {status}. See it with: grader status {exercise}",
                        id=sub.id,
                        status=status_text(sub.status),
                        exercise=exercise,
                    ),
                    lang,
                )
            )
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
        if sub.status == "failed":
            raise ServerFailure(
                msg("the server could not grade submission {id}; it does not count against you", id=sub.id)
            )
        if not sub.finished:
            raise ServerFailure(
                msg(
                    "submission {id} is still {status} after {seconds:g} s; it will be graded: "
                    "see grader status {exercise}",
                    id=sub.id,
                    status=status_text(sub.status),
                    seconds=WAIT_SECONDS,
                    exercise=exercise,
                )
            )
        print_report(api.report(sub.id, fmt, lang), fmt)
    sys.exit(EXIT_PASS if sub.passed else EXIT_FAIL)


def print_report(text: str, fmt: str) -> None:
    """The server's report: a text report always sanitised (it is for a terminal); the other
    formats byte for byte into a file or pipe, sanitised only when they reach a terminal."""
    if fmt == "text" or sys.stdout.isatty():
        echo(text.rstrip("\n"), limit=REPORT_BYTES)
    else:
        click.echo(text, nl=False)


STATUSES = {
    "queued": msg("queued"),
    "grading": msg("grading"),
    "graded": msg("graded"),
    "failed": msg("could not be graded"),  # the server's failure; "failed" reads as "did not pass"
}


def status_text(status: str):
    return STATUSES.get(status, status)


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


@click.command()
@click.argument("exercise", required=False)
@json_option
@lang_option
@insecure_option
@client_command
def status(exercise, fmt, lang, insecure):
    """Your exercises (or EXERCISE): deadlines, submissions, the one that counts, submissions left."""
    with connect(insecure, lang) as api:
        if fmt == "json":
            print_json(api.raw("/status", **({"exercise": exercise} if exercise else {})))
            return
        rows = api.status(exercise)
    headers = [
        msg("exercise"),
        msg("due"),
        msg("closes"),
        msg("submissions"),
        msg("counts"),
        msg("score"),
        msg("left"),
        msg("next submission"),
    ]
    echo(
        show.table(
            [show.say(h, lang) for h in headers],
            [
                [
                    r.exercise,
                    show.when(r.deadlines.due),
                    show.when(r.deadlines.closes),
                    r.submissions,
                    r.counted,
                    show.score(r.score, r.max_score),
                    r.tokens_left,
                    show.when(r.next_submission_at) if show.later(r.next_submission_at) else "-",
                ]
                for r in rows
            ],
        ),
        limit=REPORT_BYTES,
    )


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
    if fmt == "json":  # the server's JSON of each, as it came: one list, however many pages
        print_json(history.raw)
        return
    subs = history.items
    headers = [msg("submission"), msg("received"), msg("status"), msg("score"), msg("late"), msg("digest")]
    echo(
        show.table(
            [show.say(h, lang) for h in headers],
            [
                [
                    ("* " if s.counted else "  ") + str(s.id),
                    show.when(s.received_at),
                    show.say(status_text(s.status), lang),
                    show.score(s.score, s.max_score),
                    late_text(s, lang),
                    s.digest[:12],
                ]
                for s in subs
            ],
        ),
        limit=REPORT_BYTES,
    )


def late_text(sub, lang: str) -> str:
    if sub.late is None or sub.late.minutes <= 0:
        return "-"
    text = show.say(msg("{days} d, -{penalty:.0%}", days=sub.late.days, penalty=sub.late.penalty), lang)
    if sub.late_days_spent:
        text += " " + show.say(msg("({n} late days spent)", n=sub.late_days_spent), lang)
    return text


# -- grader starter --server -------------------------------------------------------------------


def server_starter(exercise: str, directory: Path, server: str, insecure: bool, lang: str) -> None:
    """`grader starter EXERCISE DIRECTORY --server URL`: the starter as the server gives it to
    you (a quiz: your own variant). Existing files are never overwritten."""
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
        echo(f"wrote {directory / name}")
