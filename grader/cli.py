"""The `grader` command: small click functions that parse, call the core, and render."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from grader.errors import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, GraderError
from grader.exercises import UnknownExercise, all_exercises, exercise_dir, load_exercise
from grader.locale import LANGS
from grader.submission import UsageError
from reports.render import FORMATS


def usage_error(message: str):
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def get_exercise(exercise_id: str):
    try:
        return load_exercise(exercise_id)
    except UnknownExercise as exc:
        usage_error(f"EXERCISE: {exc}")


class GraderCommands(click.Group):
    """A GraderError that a command lets through is `error: ...` and the error's exit code
    (grader/errors.py), never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GraderError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=GraderCommands)
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
@click.option("--student", help="Learner id: quizzes get this learner's variant.")
def starter(exercise, directory: Path, student):
    """Write EXERCISE's starter files into DIRECTORY."""
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
            from grader.quiz import starter_text
            target.write_text(starter_text(ex, student), encoding="utf-8")
        else:
            shutil.copyfile(src / name, target)
        click.echo(f"wrote {target}")


@main.command()
@click.argument("exercise")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="text (terminal), json, html, markdown, junit (XML), gradescope (results.json), csv.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the report here.")
@click.option("--lang", type=click.Choice(list(LANGS)), default=None,
              help="Language of the report: en or zh-TW [default: from LANGUAGE/LC_ALL/LC_MESSAGES/LANG].")
@click.option("--color/--no-color", default=None,
              help="Colour the text report [default: only when writing to a terminal].")
@click.option("--student", help="Learner id (recorded in the grade).")
def grade(exercise, path: Path, fmt, out, lang, color, student):
    """Grade the submission at PATH (a folder of learner files, or one file) for EXERCISE."""
    ex = get_exercise(exercise)
    if ex.kind == "code":       # a quiz is data: no jail to start
        from grader.jail.launcher import prestart
        prestart()          # the jail's zygote imports torch on one core while we do on the other
    from grader.grading import grade as grade_submission
    from grader.locale import lang_from_env
    from reports import render
    lang = lang or lang_from_env()
    if color is None:
        color = out is None and sys.stdout.isatty()
    try:
        result = grade_submission(ex, path, student=student)
    except UsageError as exc:
        usage_error(str(exc))
    text = render(result, fmt, lang, color=color and fmt == "text")
    if out:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            usage_error(f"--out: cannot write {out}: {exc.strerror or exc}")
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False, color=bool(color))   # click strips colour off a tty unless told
    sys.exit(EXIT_PASS if result.passed else EXIT_FAIL)


@main.group()
def mutants():
    """Injected bugs: list them, and verify that each is caught and named."""


@mutants.command("list")
def mutants_list():
    """One mutant per line: id, exercises, rule, day."""
    from grader.mutants import load_mutants
    for m in load_mutants():
        click.echo(f"{m.id:28} {','.join(m.exercises):32} {m.rule:20} day {m.day}")


@mutants.command("verify")
@click.option("--exercise", help="Only this exercise.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
def mutants_verify(exercise, workers):
    """Grade every solution, alternative and mutant; exit 1 unless each verdict is as known."""
    from grader.mutants import cases, kill_matrix, verify
    if exercise:
        get_exercise(exercise)
    selected = cases(exercise)

    def progress(v):
        mark = "ok  " if v.ok else "FAIL"
        click.echo(f"{mark} {v.case.kind:11} {v.case.exercise:16} {v.case.name:28} "
                   f"{v.grade.score:g}/{v.grade.max_score:g}  {v.why}")

    verdicts = verify(selected, workers=workers, progress=progress)
    click.echo(kill_matrix(verdicts))
    bad = [v for v in verdicts if not v.ok]
    n_mutants = len({v.case.name for v in verdicts if v.case.kind == "mutant"})
    click.echo(f"\n{len(verdicts)} cases, {n_mutants} mutants: "
               f"{'all as expected' if not bad else f'{len(bad)} NOT as expected'}")
    sys.exit(EXIT_FAIL if bad else EXIT_PASS)


@main.command()
@click.option("--quick", is_flag=True, help="Only the checks `grader grade` runs before grading.")
def doctor(quick):
    """Run canary attacks in the jail; exit 1, refusing, if any of them succeeds."""
    from grader.doctor import run
    from grader.jail.launcher import ZygoteError
    try:
        report = run(quick=quick)
    except ZygoteError as exc:
        click.echo(f"error: no jail could be started: {exc}", err=True)
        sys.exit(EXIT_FAIL)
    click.echo(report.render(), nl=False)
    sys.exit(EXIT_PASS if report.ok else EXIT_FAIL)
import grader.cli_batch  # noqa: E402,F401  (registers `batch`, `regrade` and `gradebook` on main)
