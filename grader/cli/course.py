"""`grader course`: the instructor's commands on the course's grading server (extensions, release,
the class's grades, the queue and its dead letters, retry), and `grader course check`, which reads
course.toml offline as `grader serve --course` will.

A client command like `grader submit`, on the light student install too, with the same plumbing
(grader/cli/client.py's connect and client_command; the login of `grader login --server URL
--token INSTRUCTOR_TOKEN`, or GRADER_SERVER / GRADER_TOKEN; the plain-http refusal and --insecure):
parse, call grader.client.course, render. Everything the server sent is shown sanitised
(grader.client.show). Exit codes as the student's commands: 0 done, 2 usage error or refused as
such (a student's token: the server's 403 `forbidden`; an unknown exercise or job: 404), 4 the
server's side failed.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from pathlib import Path

import click

from grader.cli.client import client_command, connect, course_zone, insecure_option, print_json
from grader.cli.common import echo, format_option, lang_option
from grader.client import show
from grader.limits import REPORT_BYTES
from grader.locale import lang_from_env, msg

WHO = (
    "Needs an instructor's token (grader login --server URL --token TOKEN, or GRADER_SERVER and "
    "GRADER_TOKEN); a student's is refused: error: ..., exit 2."
)


def course_api(insecure: bool, lang: str):
    from grader.client.course import CourseApi

    return connect(insecure, lang, api_class=CourseApi)


class When(click.ParamType):
    """An ISO 8601 time with a UTC offset (`2026-11-08T23:59:00+08:00`) or `Z`: the server's clock
    is the only clock, so a time without an offset would mean whatever this machine's zone is."""

    name = "WHEN"

    def convert(self, value, param, ctx):
        if isinstance(value, datetime):
            return value
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            when = None
        if when is None or when.tzinfo is None or when.utcoffset() is None:
            self.fail(
                show.say(
                    msg(
                        "{value} is not an ISO 8601 time with a UTC offset "
                        "(2026-11-08T23:59:00+08:00 or 2026-11-08T15:59:00Z)",
                        value=repr(value[:80]),
                    ),
                    lang_from_env(),
                ),
                param,
                ctx,
            )
        return when


@click.group()
def course():
    """Instructor commands on the course's server: extensions, release, the class's grades, the
    queue and retry. Needs an instructor's token; a student's is refused (exit 2)."""


@course.command()
@click.argument("course_file", metavar="COURSE_TOML", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--roster",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The class roster (Canvas or Moodle CSV): every [[extensions]] learner must be in it.",
)
@click.option(
    "--db",
    metavar="URL",
    help="The gradebook (a path or database URL): every [[extensions]] learner must be in it.",
)
@lang_option
@client_command
def check(course_file, roster, db, lang):
    """Check COURSE_TOML as `grader serve --course` reads it, without a server: its keys and
    times, its exercise ids and each visibility entry's check id against the exercises here
    (GRADER_EXERCISES_DIR), and with --roster or --db the [[extensions]] learners. A problem names
    the file, the key and the closest valid id, and exits 2. Needs the grading install, as
    `grader serve` does."""
    from grader.catalog.exercises import all_exercises
    from grader.policy.course import check_learners, load_policy

    policy = load_policy(course_file, [e.id for e in all_exercises()])
    known: set[str] = set()
    if roster is not None:
        from grader.policy.roster import read_roster

        known |= {row.learner for row in read_roster(roster)}
    if db is not None:
        known |= gradebook_learners(db)
    if roster is not None or db is not None:
        check_learners(policy, course_file, known)
    echo(
        show.say(
            msg(
                "{path}: fine ({exercises} exercise(s), {extensions} extension(s))",
                path=str(course_file),
                exercises=len(policy.exercises),
                extensions=len(policy.extensions),
            ),
            lang,
        )
    )
    if policy.extensions and roster is None and db is None:
        echo(
            show.say(msg("the extensions' learners were not checked: give --roster or --db"), lang), err=True
        )


def gradebook_learners(db: str) -> set[str]:
    """Every learner the gradebook at `db` knows (nothing is created when it does not exist)."""
    from sqlalchemy import select

    from grader.cli.common import open_gradebook
    from grader.store.schema import Learner

    gradebook = open_gradebook(db)
    try:
        with gradebook.sessions() as s:
            return set(s.scalars(select(Learner.key)))
    finally:
        gradebook.close()


@course.command(epilog=WHO)
@click.argument("learner")
@click.argument("exercise")
@click.option("--due", required=True, type=When(), help="The learner's own due time (with a UTC offset).")
@click.option(
    "--closes",
    type=When(),
    help="The learner's own closing time [default: the course's, or the new due if later].",
)
@click.option("--reason", default="", help="Why (kept with the extension).")
@lang_option
@insecure_option
@client_command
def extend(learner, exercise, due, closes, reason, lang, insecure):
    """Give LEARNER their own dates for EXERCISE (the newest extension applies)."""
    with course_api(insecure, lang) as api:
        got = api.extend(learner, exercise, due, closes, reason)
        zone = course_zone(api)
    echo(
        show.say(
            msg(
                "{learner}, {exercise}: due {due}, closes {closes}",
                learner=got.learner,
                exercise=got.exercise,
                due=show.when(got.deadlines.due, zone),
                closes=show.when(got.deadlines.closes, zone),
            ),
            lang,
        )
    )


@course.command(epilog=WHO)
@click.argument("exercise")
@lang_option
@insecure_option
@client_command
def release(exercise, lang, insecure):
    """Release EXERCISE: its after_release checks show to every learner from now on."""
    with course_api(insecure, lang) as api:
        got = api.release(exercise)
        zone = course_zone(api)
    echo(
        show.say(
            msg(
                "{exercise} released at {when}", exercise=got.exercise, when=show.when(got.released_at, zone)
            ),
            lang,
        )
    )


@course.command(epilog=WHO)
@click.argument("exercise")
@format_option(
    "text: a table; json: the server's JSON; csv: for a spreadsheet (formula-guarded).",
    ("text", "json", "csv"),
)
@lang_option
@insecure_option
@client_command
def grades(exercise, fmt, lang, insecure):
    """The class's grades of EXERCISE: per learner the submission that counts, its score (any late
    penalty applied) and how late it was; a learner with a token and no upload: "no submission"."""
    with course_api(insecure, lang) as api:
        if fmt == "json":
            print_json(api.raw(api.grades_path(exercise)))
            return
        rows = api.class_grades(exercise)
    if fmt == "csv":
        from reports.gradebook import render_class_grades_csv  # light: csv and grader.text only

        click.echo(render_class_grades_csv([csv_row(r) for r in rows]), nl=False)
        return
    headers = [msg("learner"), msg("name"), msg("submission"), msg("submissions"), msg("score"),
               msg("passed"), msg("late")]  # fmt: skip
    echo(
        show.table(
            [show.say(h, lang) for h in headers],
            [
                [
                    r.learner,
                    r.name,
                    show.say(msg("no submission"), lang) if not r.submissions else r.submission,
                    r.submissions,
                    show.score(r.score, r.max_score),
                    None if r.passed is None else show.say(msg("yes") if r.passed else msg("no"), lang),
                    late_text(r, lang),
                ]
                for r in rows
            ],
        ),
        limit=REPORT_BYTES,
    )


def csv_row(r) -> dict:
    late = r.late
    return {
        **r.model_dump(exclude={"late"}),
        "late_minutes": late.minutes if late else None,
        "late_days": late.days if late else None,
        "penalty": late.penalty if late else None,
    }


def late_text(r, lang: str) -> str:
    if r.late is None or r.late.minutes <= 0:
        return "-"
    return show.say(msg("{days} d, -{penalty:.0%}", days=r.late.days, penalty=r.late.penalty), lang)


@course.command(epilog=WHO)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="text: the counts and a table of dead letters; json: the server's JSON.",
)
@lang_option
@insecure_option
@client_command
def queue(fmt, lang, insecure):
    """The grading queue: jobs queued and running, how long the oldest queued one has waited, and
    the dead letters (jobs that failed every attempt on the server's side) with their last error."""
    with course_api(insecure, lang) as api:
        if fmt == "json":
            print_json(api.raw("/queue"))
            return
        state = api.queue()
        zone = course_zone(api)
    echo(queue_text(state, datetime.now(UTC), lang, zone), limit=REPORT_BYTES)
    if state.dead_letters:
        echo(show.say(msg("grade one again with: grader course retry JOB"), lang), err=True)


def queue_text(state, now: datetime, lang: str, zone: tzinfo | None = None) -> str:
    """The queue's counts, the oldest queued job's wait, and the dead letters as a table (every
    cell sanitised by show.table: a last error may hold anything a crashing grader printed)."""
    lines = [
        show.say(
            msg(
                "queued {queued}, running {running}, dead letters {dead}",
                queued=state.queued,
                running=state.running,
                dead=state.dead,
            ),
            lang,
        )
    ]
    if state.oldest_queued_at is not None:
        # wait_for(later, earlier) is the time between them: here the oldest job's age
        age = show.wait_for(now, state.oldest_queued_at)
        lines.append(
            show.say(
                msg(
                    "the oldest queued job has waited {age} (since {when})",
                    age=show.say(age, lang),
                    when=show.when(state.oldest_queued_at, zone),
                ),
                lang,
            )
        )
    if state.dead_letters:
        headers = [msg("job"), msg("submission"), msg("learner"), msg("exercise"), msg("attempts"),
                   msg("failed at"), msg("last error")]  # fmt: skip
        rows = [
            [d.job, d.upload, d.learner, d.exercise, d.attempts, show.when(d.finished_at, zone), d.last_error]
            for d in state.dead_letters
        ]
        lines.append(show.table([show.say(h, lang) for h in headers], rows))
    return "\n".join(lines)


@course.command(epilog=WHO)
@click.argument("job", type=click.IntRange(min=1))
@lang_option
@insecure_option
@client_command
def retry(job, lang, insecure):
    """Queue the dead letter JOB again, with a fresh count of attempts."""
    with course_api(insecure, lang) as api:
        got = api.retry(job)
    if got.status == "queued":
        echo(show.say(msg("job {job}: queued again", job=got.job), lang))
    else:  # a newer server's answer: said as it is
        echo(show.say(msg("job {job}: {status}", job=got.job, status=got.status), lang))
