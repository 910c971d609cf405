'''Course staff's loop for one exercise folder: scaffold it (`grader exercise new`) and check it
(`grader exercise check`): the folder's files consistent, the solution and every alternative at
full marks, every hand-written mutant killed and named by a check of its own rule, the starter
(if it is the solution with known bugs) caught and its bugs named, a sample of pairs of known
bugs named at grader.mutation.compose's floors, and the auto-mutation score at its floor.

Grading is grader.mutation.verify's (cases, verify, judge), grader.mutation.compose's (compose) and
grader.mutation.automutants' (auto_score); this module only gathers their verdicts into one summary.
'''

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

from pydantic import BaseModel

from grader.errors import ExerciseFileError, UsageError, shown_path
from grader.models import RULE_ID

EXERCISE_ID = re.compile(RULE_ID)


# -- the scaffold -----------------------------------------------------------------------------
def scaffold_files(exercise_id: str) -> dict[str, str]:
    """The files of a new exercise folder (relative path -> text): a declared rule, a starter, a
    correct placeholder solution, a hidden test as course staff write them, and one mutant that
    the test catches and names, so that `grader exercise check` is green at once."""
    module = exercise_id.replace("-", "_")
    rule = f"{exercise_id}-scaling"
    return {
        "exercise.toml": f'''id = "{exercise_id}"
kind = "code"
day = 50
files = ["{module}.py"]
points = 2

[title]
en = "Scale a tensor (placeholder: replace with your exercise)"
zh-TW = "縮放張量（範例：換成你的練習）"

[names]
"{module}.py" = ["scale"]

# a rule of this exercise's own, next to the shipped catalog
[[rules]]
id = "{rule}"
day = 50
title = {{ en = "scaling", zh-TW = "縮放" }}
''',
        f"starter/{module}.py": '''import torch


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """x times factor, elementwise, in x's dtype."""
    raise NotImplementedError
''',
        f"solution/{module}.py": '''import torch


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    """x times factor, elementwise, in x's dtype."""
    return x * factor
''',
        f"hidden/test_{module}.py": f'''"""Hidden tests for {exercise_id}: {module}.py against torch."""
from hypothesis import strategies as st

from grader.testkit import check, expect_close, expect_shape, explore, random_tensor, seeds, sizes

CASES = st.tuples(sizes(1, 6), sizes(1, 6), seeds())


@check(points=1, rule="{rule}", day=50, title="scale(x, f) is x * f")
def test_scale_matches_torch(submission):
    def prop(case):
        rows, cols, seed = case
        x = random_tensor((rows, cols), seed=seed)
        expect_close(submission.{module}.scale(x, 3.0), x * 3.0, "scale(x, 3.0)", dtype=x.dtype)

    explore(CASES, prop, what="scale")


@check(points=1, rule="api-contract", day=50, title="scale keeps the shape of x")
def test_scale_keeps_shape(submission):
    x = random_tensor((2, 3, 4))
    expect_shape(submission.{module}.scale(x, 2.0), (2, 3, 4), "scale(x, 2.0)")
''',
        "mutants/scale-adds.toml": f'''id = "scale-adds"
rule = "{rule}"
day = 50
description = "scale adds the factor instead of multiplying by it"

[message]
en = "scale adds the factor to x instead of multiplying x by it: use x * factor."
zh-TW = "scale 把 factor 加到 x 上，而不是把 x 乘以 factor：請用 x * factor。"

[[edit]]
file = "{module}.py"
find = "return x * factor"
replace = "return x + factor"
''',
    }


def scaffold(exercise_id: str, folder: Path) -> list[Path]:
    """Write scaffold_files into `folder`, which must not exist or be empty (UsageError)."""
    if not EXERCISE_ID.match(exercise_id):
        raise UsageError(
            f"exercise id {exercise_id!r}: use lowercase letters, digits and '-' (e.g. day50-topk)"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{shown_path(folder)}: exists and is not empty; give a new folder")
    written = []
    for name, text in scaffold_files(exercise_id).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


# -- the check --------------------------------------------------------------------------------
class Row(BaseModel):
    kind: str  # "files", "solution", "alternative", "mutant", "starter", "compose", "auto"
    name: str
    ok: bool
    score: str = ""
    why: str = ""


class Summary(BaseModel):
    exercise: str
    rows: list[Row]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def file_problems(exercise_id: str) -> list[str]:
    """What makes the folder unusable, one line each naming file and item (exercise.toml read by
    load_exercise already): mutants of this exercise with a rule it does not know, starter
    mutants that do not exist, and the hidden tests' markers (grader.grading.runner.marker_problems)."""
    from grader.catalog.exercises import exercise_dir, load_exercise
    from grader.catalog.mutants import load_mutants, mutant_files
    from grader.catalog.rules import exercise_rules
    from grader.grading.runner import run_hidden_tests

    exercise = load_exercise(exercise_id)
    known = exercise_rules(exercise)
    where = {p.stem: p for p, _ in mutant_files()}
    problems = []
    mutants = {m.id: m for m in load_mutants()}
    for m in mutants.values():
        if exercise_id in m.exercises and m.rule not in known:
            problems.append(
                f"{shown_path(where[m.id])}: unknown rule {m.rule!r}; declare it in exercise.toml [[rules]]"
            )
    toml = shown_path(exercise_dir(exercise_id) / "exercise.toml")
    problems += [
        f"{toml}: starter_mutants: unknown mutant {m!r}" for m in exercise.starter_mutants if m not in mutants
    ]
    hidden = exercise_dir(exercise_id) / "hidden"
    if exercise.kind == "code":
        if not hidden.is_dir():
            problems.append(f"{shown_path(hidden)}: missing: a code exercise's hidden tests")
        else:
            try:
                run_hidden_tests(hidden, SimpleNamespace(), exercise=exercise, collect_only=True)
            except ExerciseFileError as exc:
                problems += str(exc).splitlines()
    return problems


def check_exercise(
    exercise_id: str,
    *,
    auto: bool = True,
    budget: int | None = None,
    workers: int = 2,
    progress=None,
    grade_with=None,
) -> Summary:
    """The summary of `grader exercise check`; ExerciseFileError (exit 2) when the folder is
    unusable. grade_with: grades the cases in this process (grader.mutation.verify.verify)."""
    from grader.mutation.verify import cases, verify

    if problems := file_problems(exercise_id):
        raise ExerciseFileError("\n".join(problems))
    rows = [Row(kind="files", name="points, rules, translations", ok=True)]
    for v in verify(cases(exercise_id), workers=workers, progress=progress, grade_with=grade_with):
        rows.append(
            Row(
                kind=v.case.kind,
                name=v.case.name,
                ok=v.ok,
                score=f"{v.grade.score:g}/{v.grade.max_score:g}",
                why=v.why,
            )
        )
    rows.append(compose_row(exercise_id, workers, grade_with))
    if auto:
        rows.append(auto_row(exercise_id, budget, workers))
    return Summary(exercise=exercise_id, rows=rows)


# `exercise check` composes this many pairs of known bugs per exercise (grader.mutation.compose), drawn
# with the default seed: a few grades, within the suite's budget (tests/README.md). Single bugs
# are each a mutant case already (grader.mutation.verify.judge).
COMPOSE_K = 2
COMPOSE_SAMPLE = 4


def compose_row(exercise_id: str, workers: int, grade_with=None) -> Row:
    """A sample of pairs of the exercise's known bugs, graded and held to grader.mutation.compose.FLOORS
    (the naming time is not measured here)."""
    from grader.mutation.compose import compose

    report = compose(
        exercise_id, COMPOSE_K, COMPOSE_SAMPLE, workers=workers, timing=False, grade_with=grade_with
    )
    name = f"compose k={COMPOSE_K}"
    if not report.rows:
        why = f"no {COMPOSE_K} of its {report.bugs} known bugs apply together: nothing to compose"
        return Row(kind="compose", name=name, ok=True, why=why)
    t = report.totals
    precision = "-" if t.precision is None else f"{t.precision:.2f}"
    recall = "-" if t.recall is None else f"{t.recall:.2f}"
    wrong = [report.rows[i].outcome for i in t.wrong]
    why = f"{len(report.rows)} of {report.compatible} pairs"
    if report.problems:
        why += ": " + "; ".join(report.problems)
    if wrong:
        why += "; wrong names: " + ", ".join(
            f"{'+'.join(o.injected)} named {','.join(o.wrong)}" for o in wrong
        )
    return Row(kind="compose", name=name, ok=report.passed, score=f"P {precision} R {recall}", why=why)


def auto_row(exercise_id: str, budget: int | None, workers: int) -> Row:
    try:
        from grader.mutation.automutants import auto_score
    except ImportError:
        return Row(kind="auto", name="auto mutants", ok=True, why="auto mutants: not available")
    report = auto_score(exercise_id, budget, workers=workers)
    survivors = ", ".join(s.id for s in report.survivors[:5])
    return Row(
        kind="auto",
        name="auto mutants",
        ok=report.adjusted >= report.floor,
        score=f"{report.adjusted:.0%} (floor {report.floor:.0%})",
        why=(
            f"{report.killed} killed, {report.survived} survived, "
            f"{report.likely_equivalent + report.reviewed_equivalent} equivalent of {report.graded}"
            + (f"; survivors: {survivors}" if report.survived else "")
        ),
    )


def render_text(summary: Summary) -> str:
    """The summary as a table: rich's where it is installed, else plain aligned text."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        width = max(len(r.name) for r in summary.rows)
        lines = [f"{summary.exercise}"]
        lines += [
            f"{'ok  ' if r.ok else 'FAIL'} {r.kind:11} {r.name:{width}} {r.score:>16}  {r.why}"
            for r in summary.rows
        ]
        lines.append("green" if summary.ok else "red")
        return "\n".join(lines)
    table = Table(title=f"{summary.exercise}: {'green' if summary.ok else 'red'}")
    for column in ("", "kind", "name", "score", "why"):
        table.add_column(column)
    for r in summary.rows:
        table.add_row("ok" if r.ok else "FAIL", r.kind, r.name, r.score, r.why)
    out = io.StringIO()
    Console(width=160, file=out).print(table)
    return out.getvalue()
