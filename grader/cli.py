"""The `grader` command: small click functions that parse, call the core, and render."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from grader.exercises import UnknownExercise, all_exercises, exercise_dir, load_exercise
from grader.submission import UsageError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def usage_error(message: str):
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def get_exercise(exercise_id: str):
    try:
        return load_exercise(exercise_id)
    except UnknownExercise as exc:
        usage_error(f"EXERCISE: {exc}")


@click.group()
@click.version_option(package_name="gpt-bughunt-grader")
def main():
    """Grade learners' transformer code and answers against a trusted reference."""


@main.command("exercises")
def list_exercises():
    """List the exercises."""
    for ex in all_exercises():
        click.echo(f"{ex.id:18} day {ex.day:<3} {ex.kind:5} {ex.points:>5g} pts  "
                   f"{', '.join(ex.files):40} {ex.title.en}")


@main.command()
@click.argument("exercise")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def starter(exercise, directory: Path):
    """Write EXERCISE's starter files into DIRECTORY."""
    ex = get_exercise(exercise)
    src = exercise_dir(ex.id) / "starter"
    directory.mkdir(parents=True, exist_ok=True)
    for name in ex.files:
        target = directory / name
        if target.exists():
            usage_error(f"DIRECTORY: {target} already exists; not overwriting it")
        shutil.copyfile(src / name, target)
        click.echo(f"wrote {target}")


@main.command()
@click.argument("exercise")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the report here.")
@click.option("--lang", type=click.Choice(["en", "zh-TW"]), default="en", show_default=True)
@click.option("--student", help="Learner id (recorded in the grade).")
def grade(exercise, path: Path, fmt, out, lang, student):
    """Grade the submission at PATH (a folder of learner files, or one file) for EXERCISE."""
    from grader.grading import grade as grade_submission
    from reports import render
    ex = get_exercise(exercise)
    try:
        result = grade_submission(ex, path, student=student)
    except UsageError as exc:
        usage_error(str(exc))
    text = render(result, fmt, lang)
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
    sys.exit(EXIT_PASS if result.passed else EXIT_FAIL)
