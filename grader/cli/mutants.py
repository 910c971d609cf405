"""`grader mutants list|verify`: the injected bugs, each of which must be caught and named."""

from __future__ import annotations

import sys

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, get_exercise


@click.group()
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
        click.echo(
            f"{mark} {v.case.kind:11} {v.case.exercise:16} {v.case.name:28} "
            f"{v.grade.score:g}/{v.grade.max_score:g}  {v.why}"
        )

    verdicts = verify(selected, workers=workers, progress=progress)
    click.echo(kill_matrix(verdicts))
    bad = [v for v in verdicts if not v.ok]
    n_mutants = len({v.case.name for v in verdicts if v.case.kind == "mutant"})
    click.echo(
        f"\n{len(verdicts)} cases, {n_mutants} mutants: "
        f"{'all as expected' if not bad else f'{len(bad)} NOT as expected'}"
    )
    sys.exit(EXIT_FAIL if bad else EXIT_PASS)


@mutants.command("auto")
@click.argument("exercise")
@click.option(
    "--budget",
    type=click.IntRange(1),
    help="At most N mutants: round-robin over (operator, file) groups, each in id order.",
)
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def mutants_auto(exercise, budget, workers, fmt):
    """Grade generated first-order mutants of the solution; exit 1 if the score is below 0.95."""
    from grader.automutants import auto_score

    get_exercise(exercise)
    report = auto_score(exercise, budget, workers)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        for op, row in sorted(report.by_operator.items()):
            click.echo(f"{op:20} killed {row['killed']:4}  survived {row['survived']:4}")
        for m in report.survivors:
            click.echo(f"\nSURVIVOR {m.id}\n{m.diff}")
        click.echo(f"\nraw {report.raw:.3f}  adjusted {report.adjusted:.3f}  {report.seconds}s")
    sys.exit(EXIT_PASS if report.adjusted >= 0.95 else EXIT_FAIL)
