"""`grader mutants list|verify|auto|compose`: the injected bugs, each of which must be caught and
named; generated ones; and known bugs composed, to measure the bug namer."""

from __future__ import annotations

import sys

import click

from grader.cli.common import EXIT_FAIL, EXIT_PASS, echo, get_exercise, usage_error


@click.group()
def mutants():
    """Injected bugs: list them, and verify that each is caught and named."""


@mutants.command("list")
def mutants_list():
    """One mutant per line: id, exercises, rule, day."""
    from grader.catalog.mutants import load_mutants

    for m in load_mutants():
        click.echo(f"{m.id:28} {','.join(m.exercises):32} {m.rule:20} day {m.day}")


@mutants.command("verify")
@click.option("--exercise", help="Only this exercise.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
def mutants_verify(exercise, workers):
    """Grade every solution, alternative and mutant; exit 1 unless each verdict is as known."""
    from grader.mutation.verify import cases, kill_matrix, verify

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
    help="At most N mutants, chosen deterministically: round-robin over the (operator, file) "
    "groups in name order, each group in mutant-id order, so every operator and file is "
    "represented before any has a second. Default: all.",
)
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--no-cache", is_flag=True, help="Grade every mutant again (GRADER_CACHE_DIR/automut is not read)."
)
def mutants_auto(exercise, budget, workers, fmt, no_cache):
    """Grade generated first-order mutants of EXERCISE's solution through the learner's path.

    Operators: see docs/automutants.md (arithmetic, comparison, boolean, constants, removed
    statements, swapped arguments, slices, and tensor ones: dim, keepdim, triu/tril, diagonal,
    the mask value, scale, softmax, residual, LayerNorm placement, variance, eps, view order,
    loss reduction, target shift). Never mutated: `__main__` blocks, docstrings, and messages
    (the arguments of raise, f-strings, assert messages): the grade checks an exception's type,
    not its wording. A survivor whose outputs and gradients equal the solution's in float64 on
    the grader's inputs is likely equivalent; one pinned by hash in EXERCISE/equivalents.toml
    is a reviewed equivalent; neither counts in the adjusted score. Results are cached by the
    solution, hidden tests, grader version and mutant. Exit 0 if adjusted >= the exercise's
    [mutation] floor (default 0.95), 1 below it, 2 on bad input."""
    from grader.errors import UsageError
    from grader.mutation.automutants import auto_score, text_report

    get_exercise(exercise)
    try:
        report = auto_score(exercise, budget, workers, cache=not no_cache)
    except UsageError as exc:
        usage_error(str(exc))
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        echo(text_report(report), limit=10**7)
    sys.exit(EXIT_PASS if report.passed else EXIT_FAIL)


@mutants.command("compose")
@click.argument("exercise")
@click.option(
    "--k", "k", type=click.IntRange(1, 3), default=2, show_default=True, help="Bugs per composition."
)
@click.option(
    "--sample",
    type=click.IntRange(1),
    help="Grade N of the compositions, drawn with --seed (the same N every run). Default: all.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The sample's seed.")
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def mutants_compose(exercise, k, sample, seed, workers, fmt):
    """Measure the bug namer on EXERCISE: every set of K of its known bugs whose edits apply
    together on the solution (overlapping ones skipped and counted) is graded through the
    learner's path, and what the grade states as fact (diagnoses at level "reproduced") is
    compared with what was injected. Prints each composition (injected, named, candidates,
    localized, passed, seconds, and the seconds naming added: each composition is graded once
    without naming too), then precision, recall (over the failed compositions), candidates,
    wrong names, contradictory facts and the naming time. See docs/diagnosis.md.

    Exit 0 if the floors of grader.mutation.compose.FLOORS hold for K, 1 below them, 2 on bad input
    (an unknown or quiz exercise, no K bugs that apply together)."""
    from grader.errors import UsageError
    from grader.mutation.compose import compose, report_json, text_report

    get_exercise(exercise)

    def progress(row):
        if fmt == "text":
            o = row.outcome
            echo(f"graded {'+'.join(o.injected)}: named {','.join(o.named) or '-'}", err=True)

    try:
        report = compose(exercise, k, sample, seed, workers, progress=progress)
    except UsageError as exc:
        usage_error(str(exc))
    if not report.rows:
        usage_error(f"{exercise}: no {k} of its {report.bugs} known bugs apply together on the solution")
    if fmt == "json":
        click.echo(report_json(report))
    else:
        echo(text_report(report), limit=10**7)
    sys.exit(EXIT_PASS if report.passed else EXIT_FAIL)
