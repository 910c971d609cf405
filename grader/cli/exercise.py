"""`grader exercise new|check`: course staff's loop for one exercise folder (grader.mutation.authoring)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, echo


@click.group()
def exercise():
    """Author an exercise: scaffold a folder, and check it from end to end."""


@exercise.command("new")
@click.argument("exercise_id")
@click.argument("folder", type=click.Path(path_type=Path))
def exercise_new(exercise_id, folder):
    """Scaffold FOLDER for exercise EXERCISE_ID: exercise.toml with a rule of its own, starter/,
    a correct placeholder solution/, hidden/ tests and a mutant they catch; `grader exercise
    check FOLDER` is green at once. FOLDER must not exist or be empty."""
    from grader.mutation.authoring import scaffold

    for path in scaffold(exercise_id, folder):
        echo(str(path))
    echo(f"next: grader exercise check {folder}")


@exercise.command("check")
@click.argument("target")
@click.option("--budget", type=click.IntRange(0), default=None, help="Auto mutants to grade at most.")
@click.option("--no-auto", is_flag=True, help="Skip the auto mutants.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def exercise_check(target, budget, no_auto, workers, fmt):
    """Check exercise TARGET (an id, or a folder anywhere): files consistent, solution and
    alternatives at full marks, each mutant killed by a check of its rule and named as fact, the
    starter caught and its bugs named, a sample of pairs of known bugs named at the floors of
    `grader mutants compose`, the auto-mutation score at its floor. Exit 0 green, 1 red, 2
    unusable input."""
    from exercises import EXERCISES_DIR
    from grader.cli.common import get_exercise, usage_error
    from grader.mutation.authoring import check_exercise, render_text

    folder = Path(target)
    if (folder / "exercise.toml").is_file():
        parent = folder.resolve().parent
        if parent != EXERCISES_DIR:
            # a folder outside the exercises: this run (and the workers it spawns) reads its parent
            env = {**os.environ, "GRADER_EXERCISES_DIR": str(parent)}
            options = ["--workers", str(workers), "--format", fmt, *(["--no-auto"] if no_auto else [])]
            options += ["--budget", str(budget)] if budget is not None else []
            args = [sys.executable, "-m", "grader", "exercise", "check", folder.resolve().name, *options]
            sys.exit(subprocess.run(args, env=env).returncode)
        exercise_id = folder.resolve().name
    elif folder.exists() and os.sep in target:
        usage_error(f"{target}: no exercise.toml in this folder")
    else:
        exercise_id = target
    get_exercise(exercise_id)

    def progress(v):
        if fmt == "text":
            echo(f"{'ok  ' if v.ok else 'FAIL'} {v.case.kind:11} {v.case.name}", err=True)

    summary = check_exercise(exercise_id, auto=not no_auto, budget=budget, workers=workers, progress=progress)
    if fmt == "json":
        click.echo(summary.model_dump_json(indent=2))
    else:
        click.echo(render_text(summary))
    sys.exit(EXIT_PASS if summary.ok else EXIT_FAIL)
