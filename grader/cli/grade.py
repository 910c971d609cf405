"""`grader exercises`, `grader starter` and `grader grade`: one learner, one submission."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from grader.cli.common import (
    EXIT_FAIL,
    EXIT_PASS,
    format_option,
    get_exercise,
    lang_option,
    usage_error,
    write_out,
)


@click.command("exercises")
def list_exercises():
    """List the exercises."""
    from grader.catalog.exercises import all_exercises

    for ex in all_exercises():
        click.echo(
            f"{ex.id:18} day {ex.day:<3} {ex.kind:5} {ex.points:>5g} pts  "
            f"{', '.join(ex.files):40} {ex.title.en}"
        )


@click.command()
@click.argument("exercise")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--student", help="Learner id: quizzes get this learner's variant (with --sample).")
@click.option(
    "--server",
    metavar="URL",
    help="The course's grading server to fetch it from [default: the one of `grader login`].",
)
@click.option(
    "--sample",
    is_flag=True,
    help="The public sample's starter bundled with the grading install, not your course's.",
)
@click.option("--insecure", is_flag=True, help="Allow a plain http:// server that is not this machine.")
def starter(exercise, directory: Path, student, server, sample, insecure):
    """Write EXERCISE's starter files into DIRECTORY: your course's, from its server once you are
    logged in (a quiz: your own variant); the public sample's with --sample, or when not logged in."""
    if server and (sample or student):
        usage_error(
            "--server: the server gives you your own variant; --sample and --student are for the "
            "public sample's starter"
        )
    note = None
    if not (sample or student):
        from grader.cli.client import client_command, logged_in, server_starter
        from grader.locale import lang_from_env, msg

        lang = lang_from_env()
        if server or client_command(logged_in)(lang=lang):
            client_command(server_starter)(
                exercise=exercise, directory=directory, server=server, insecure=insecure, lang=lang
            )
            return
        note = msg(
            "not logged in to a course's server: this is the public sample's starter "
            "(grader login --server URL first for your course's; --sample says you mean the sample)"
        ).render(lang)
    from grader.catalog.exercises import exercise_dir

    ex = get_exercise(exercise)
    src = exercise_dir(ex.id) / "starter"
    directory.mkdir(parents=True, exist_ok=True)
    for name in ex.files:
        target = directory / name
        if target.exists():
            usage_error(f"DIRECTORY: {target} already exists; not overwriting it")
    for name in ex.files:
        target = directory / name
        if ex.kind == "quiz":
            from grader.catalog.quiz import starter_text

            target.write_text(starter_text(ex, student), encoding="utf-8")
        else:
            shutil.copyfile(src / name, target)
        click.echo(f"wrote {target}")
    if note is not None:  # said once the starter is written: an error comes first, alone
        click.echo(note, err=True)


@click.command()
@click.argument("exercise")
@click.argument("path", type=click.Path(path_type=Path))
@format_option("text (terminal), json, html, markdown, junit (XML), gradescope (results.json), csv.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the report here.")
@lang_option
@click.option(
    "--color/--no-color",
    default=None,
    help="Colour the text report [default: only when writing to a terminal].",
)
@click.option("--student", help="Learner id (recorded in the grade).")
def grade(exercise, path: Path, fmt, out, lang, color, student):
    """Grade the submission at PATH (a folder of learner files, or one file) for EXERCISE."""
    ex = get_exercise(exercise)
    if ex.kind == "code":  # a quiz is data: no jail to start
        from grader.jail.launcher import prestart

        prestart()  # the jail's zygote imports torch on one core while we do on the other
    from grader.grading.grade import grade as grade_submission
    from grader.intake.submission import UsageError
    from reports import render

    if color is None:
        color = out is None and sys.stdout.isatty()
    try:
        result = grade_submission(ex, path, student=student)
    except UsageError as exc:
        usage_error(str(exc))
    text = render(result, fmt, lang, color=color and fmt == "text")
    if out:
        write_out(out, text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False, color=bool(color))  # click strips colour off a tty unless told
    sys.exit(EXIT_PASS if result.passed else EXIT_FAIL)
