"""`grader gradescope build EX --out autograder.zip [--course course.toml]`: the zip Gradescope's
autograder takes for one exercise (grader/course/autograder.py says what it holds and how it runs)."""

from __future__ import annotations

from pathlib import Path

import click

from grader.cli.common import echo, get_exercise, lang_option, usage_error


@click.group()
def gradescope():
    """Run the grader on Gradescope: build an exercise's autograder zip."""


@gradescope.command("build")
@click.argument("exercise")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The zip to write (its folder must exist), e.g. autograder.zip.",
)
@click.option(
    "--course",
    type=click.Path(dir_okay=False, path_type=Path),
    help="course.toml: each check's visibility (after_due -> after_due_date, after_release -> "
    "after_published, hidden -> hidden) [default: every check visible].",
)
@lang_option
def build(exercise, out: Path, course: Path | None, lang: str):
    """Build EXERCISE's Gradescope autograder: setup.sh, run_autograder, the grader and only this
    exercise's hidden tests and solution. Upload the zip as the assignment's autograder."""
    from grader.catalog.exercises import all_exercises
    from grader.course.autograder import build as build_zip
    from grader.policy.course import load_policy

    ex = get_exercise(exercise)
    policy = load_policy(course, [e.id for e in all_exercises()])  # a PolicyError exits 2, naming it
    if not out.parent.is_dir():
        usage_error(f"--out: the folder {out.parent} does not exist")
    try:
        files = build_zip(ex.id, out, policy, lang)
    except OSError as exc:
        usage_error(f"--out: cannot write {out}: {exc.strerror or exc}")
    echo(f"wrote {out}: {len(files)} files for {ex.id} (upload it as the assignment's autograder)")
