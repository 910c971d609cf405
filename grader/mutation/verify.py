"""Mutants are submissions whose verdict we know (DESIGN.md, principle 3): `verify` grades every
solution, every correct alternative and every mutant through the same path as a learner
submission, and `judge` holds each grade to its case (the solution at full marks, a mutant caught
and its own bug named)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from pydantic import BaseModel

from exercises import EXERCISES_DIR
from grader.catalog.exercises import load_exercise
from grader.catalog.mutants import Mutant, alternatives, apply_mutant, load_mutants
from grader.errors import ExerciseFileError, UsageError, shown_path
from grader.grading.grade import failed_grade, grade
from grader.models import Exercise, Grade
from mutants import ALTERNATIVES_DIR


class Case(BaseModel):
    kind: str  # "solution", "alternative", "mutant", "starter"
    name: str
    exercise: str
    expected_rules: list[str] = []
    symptoms: list[str] = []
    named: list[str] = []


class Verdict(BaseModel):
    case: Case
    grade: Grade
    ok: bool
    why: str = ""


def cases(exercise: str | None = None) -> list[Case]:
    out: list[Case] = []
    for ex_dir in sorted(EXERCISES_DIR.glob("*/exercise.toml")):
        ex = ex_dir.parent.name
        if (ex_dir.parent / "hidden").is_dir() and exercise in (None, ex):
            out.append(Case(kind="solution", name="solution", exercise=ex))
    out += [
        Case(kind="alternative", name=name, exercise=ex)
        for ex, name, _ in alternatives()
        if exercise in (None, ex)
    ]
    mutants = {m.id: m for m in load_mutants()}
    for m in mutants.values():
        for ex in m.exercises:
            if exercise in (None, ex):
                out.append(
                    Case(
                        kind="mutant",
                        name=m.id,
                        exercise=ex,
                        expected_rules=[m.rule],
                        symptoms=m.symptoms,
                        named=[m.id],  # the mutant is its own fingerprint (grader.grading.fingerprints)
                    )
                )
    for ex_dir in sorted(EXERCISES_DIR.glob("*/exercise.toml")):
        ex = ex_dir.parent.name
        if exercise in (None, ex):
            out += starter_cases(load_exercise(ex), mutants)
    return out


def starter_cases(ex: Exercise, mutants: dict[str, Mutant]) -> list[Case]:
    """A starter that is the solution with known bugs (exercise.toml `starter_mutants`, a bug
    hunt): one case, in which each bug must be caught by a check of its rule and named."""
    if not ex.starter_mutants:
        return []
    unknown = [m for m in ex.starter_mutants if m not in mutants]
    if unknown:
        path = shown_path(EXERCISES_DIR / ex.id / "exercise.toml")
        raise ExerciseFileError(f"{path}: starter_mutants: unknown mutant {unknown[0]!r}")
    bugs = [mutants[m] for m in ex.starter_mutants]
    return [
        Case(
            kind="starter",
            name="starter",
            exercise=ex.id,
            expected_rules=list(dict.fromkeys(m.rule for m in bugs)),
            symptoms=ex.starter_symptoms,
            named=ex.starter_mutants,
        )
    ]


def judge(case: Case, grade: Grade) -> Verdict:
    internal = [c.id for c in grade.checks if c.message.startswith("internal grader error")]
    if internal:
        return Verdict(case=case, grade=grade, ok=False, why=f"internal grader error in {internal}")
    if case.kind in ("solution", "alternative"):
        failing = [c.id for c in grade.checks if not c.passed]
        ok = grade.passed and grade.score == grade.max_score
        why = "" if ok else f"correct code lost points: {failing or grade.error}"
        return Verdict(case=case, grade=grade, ok=ok, why=why)
    failed_rules = {c.rule for c in grade.checks if not c.passed}
    problems = [f"no failing check of rule {r}" for r in case.expected_rules if r not in failed_rules]
    problems += [f"symptom {s} not reported" for s in case.symptoms if s not in grade.symptoms]
    problems += naming_problems(case, grade)
    if grade.passed:
        problems.insert(0, "the mutant passed")
    return Verdict(case=case, grade=grade, ok=not problems, why="; ".join(problems))


def naming_problems(case: Case, grade: Grade) -> list[str]:
    """What the diagnosis gets wrong (docs/diagnosis.md): a mutant case's bug must be named at
    level "reproduced" (stated as fact); a starter's bugs each as reproduced or as a candidate.
    No bug the case does not hold may be stated as fact: a wrong name fails the case."""
    facts = {d.mutant for d in grade.diagnosis if d.level == "reproduced" and d.mutant}
    candidates = {d.mutant for d in grade.diagnosis if d.level == "candidate" and d.mutant}
    if case.kind == "mutant":
        problems = [f"diagnosis does not state {n} as reproduced" for n in case.named if n not in facts]
    else:
        problems = [
            f"diagnosis names {n} neither as reproduced nor as a candidate"
            for n in case.named
            if n not in facts | candidates
        ]
    wrong = sorted(facts - set(case.named))
    if wrong:
        problems.append(f"diagnosis states {', '.join(wrong)} as reproduced: not in this case (a wrong name)")
    return problems


def grade_case(case: Case, grade_with=None) -> Verdict:
    """One case's verdict. A case that cannot be graded at all (exit 2 for `grader grade`) is a
    failed verdict naming why, never an exception: one bad case must not end the whole run.
    grade_with(exercise, path) -> Grade: grader.grading.grade.grade unless given (a store of grades)."""
    try:
        return _grade_case(case, grade_with or grade)
    except UsageError as exc:
        unreadable = failed_grade(load_exercise(case.exercise), "invalid-submission", str(exc))
        return Verdict(case=case, grade=unreadable, ok=False, why=f"could not be graded: {exc}")


def _grade_case(case: Case, grade) -> Verdict:

    with tempfile.TemporaryDirectory(prefix="grader-mutant-") as tmp:
        if case.kind == "solution":
            path = EXERCISES_DIR / case.exercise / "solution"
        elif case.kind == "starter":
            path = EXERCISES_DIR / case.exercise / "starter"
        elif case.kind == "alternative":
            found = [d for ex, name, d in alternatives() if (ex, name) == (case.exercise, case.name)]
            path = found[0] if found else ALTERNATIVES_DIR / case.exercise / case.name
        else:
            mutant = next(m for m in load_mutants() if m.id == case.name)
            path = apply_mutant(mutant, case.exercise, Path(tmp) / "submission")
        return judge(case, grade(case.exercise, path))


def verify(selected: list[Case], workers: int = 2, progress=None, grade_with=None) -> list[Verdict]:
    """Grade every case, `workers` at a time in fresh processes (pytest is not thread-safe); with
    grade_with (see grade_case), one at a time in this process, each graded by it."""
    verdicts = []
    graded: Iterator[Verdict]
    with contextlib.ExitStack() as stack:
        if grade_with is not None:
            graded = (grade_case(case, grade_with) for case in selected)
        else:
            pool = stack.enter_context(
                ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
            )
            graded = pool.map(grade_case, selected)
        for verdict in graded:
            verdicts.append(verdict)
            if progress:
                progress(verdict)
    return verdicts


def kill_matrix(verdicts: list[Verdict]) -> str:
    """Per exercise: one row per mutant, one column per check; x where the check failed."""
    lines = []
    for exercise in sorted({v.case.exercise for v in verdicts}):
        rows = [v for v in verdicts if v.case.exercise == exercise and v.case.kind in ("mutant", "starter")]
        if not rows:
            continue
        check_ids = [c.id for c in rows[0].grade.checks] or ["(none)"]
        lines.append(f"\n{exercise}: columns are checks")
        for i, cid in enumerate(check_ids):
            lines.append(f"  c{i:<2} {cid}")
        width = max(len(v.case.name) for v in rows)
        lines.append(" " * (width + 2) + " ".join(f"c{i:<2}" for i in range(len(check_ids))))
        for v in rows:
            failed = {c.id for c in v.grade.checks if not c.passed}
            cells = " ".join(f"{'x' if cid in failed else '.':3}" for cid in check_ids)
            err = f"  error: {v.grade.error.kind}" if v.grade.error else ""
            lines.append(f"{v.case.name:{width}}  {cells}{err}")
    return "\n".join(lines)
