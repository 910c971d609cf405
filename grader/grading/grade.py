"""grade(exercise, path) -> Grade: the imperative shell around the hidden tests.

Reads the submission (never executing it), copies the learner files into a fresh folder, starts
the jail there, runs the hidden tests against it, and assembles the Grade from plain data.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from grader import __version__
from grader.catalog.exercises import exercise_dir, load_exercise
from grader.catalog.quiz import grade_sheet
from grader.grading.fingerprints import Namer
from grader.grading.replay import Event, Trace
from grader.grading.runner import run_hidden_tests, stopped_at
from grader.grading.session import SubmissionSession, import_problem
from grader.intake.submission import InvalidSubmission, SubmittedFiles, read_submission
from grader.jail.client import JailError, JailTimeout
from grader.jail.doctor import ensure_sound as ensure_jail_sound
from grader.locale import message_of, msg
from grader.models import CheckResult, Diagnosis, Exercise, Grade, GradeError, Printed


def grade(
    exercise: Exercise | str,
    path: Path,
    *,
    student: str | None = None,
    name_bugs: bool = True,
    max_failures: int | None = None,
) -> Grade:
    """Grade one submission. Raises UsageError (exit 2) only when grading cannot start.
    name_bugs: replay failed checks on the exercise's mutants to name the learner's bug (off
    where only the verdict counts: scoring generated mutants); max_failures: stop after that
    many failed checks (a verdict only: the checks not run are missing from the Grade)."""
    exercise = load_exercise(exercise) if isinstance(exercise, str) else exercise
    started = time.monotonic()
    digest = "invalid"
    try:
        submitted = read_submission(exercise, Path(path))
    except InvalidSubmission as exc:
        result = failed_grade(exercise, "invalid-submission", message_of(exc))
    else:
        digest = submitted.digest
        if exercise.kind == "quiz":
            result = grade_quiz(exercise, submitted, student)
        else:
            ensure_jail_sound()  # cached canary check: refuses (UsageError) if the jail leaks
            result = grade_code(exercise, submitted, name_bugs=name_bugs, max_failures=max_failures)
    graded = Grade.model_validate(
        {
            **result.model_dump(),
            "student": student,
            "grader_version": __version__,
            "duration_s": round(time.monotonic() - started, 3),
        }
    )
    if os.environ.get("GRADER_GRADE_LOG"):
        log_grade(os.environ["GRADER_GRADE_LOG"], exercise, digest, graded, name_bugs, max_failures)
    return graded


def log_grade(log: str, exercise: Exercise, digest: str, graded: Grade, name_bugs, max_failures) -> None:
    """One line per grade for the test suite's map (tests/README.md): which test graded what,
    keyed as a repeat would be (exercise, its files' digest, the options), and what it cost."""
    line = {
        # the suite's conftest names the test (an in-process grade's own pytest run has cleared
        # PYTEST_CURRENT_TEST by now)
        "test": os.environ.get("GRADER_TEST_ID", ""),
        "pid": os.getpid(),
        "exercise": exercise.id,
        "digest": digest,
        "options": [name_bugs, max_failures],
        "seconds": graded.duration_s,
    }
    with open(log, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def failed_grade(exercise: Exercise, kind: str, message: str, checks=(), isolation="none") -> Grade:
    return assemble(exercise, list(checks), [], GradeError(kind=kind, message=message), isolation)


def assemble(
    exercise: Exercise,
    checks: list[CheckResult],
    diagnosis: list[Diagnosis],
    error: GradeError | None,
    isolation: str,
    output: Printed | None = None,
    warnings=(),
) -> Grade:
    symptoms: list[str] = []
    for c in checks:
        symptoms += [s for s in c.symptoms if s not in symptoms]
    score = round(sum(c.points for c in checks), 6)
    return Grade(
        exercise=exercise.id,
        passed=error is None and bool(checks) and all(c.passed for c in checks),
        score=score,
        max_score=float(exercise.points),
        checks=checks,
        symptoms=symptoms,
        diagnosis=diagnosis,
        error=error,
        isolation=isolation,
        output=output or Printed(),
        warnings=list(warnings),
    )


def grade_quiz(exercise: Exercise, submitted: SubmittedFiles, student: str | None) -> Grade:
    checks, warnings = grade_sheet(exercise, submitted, student)
    return assemble(exercise, checks, [], None, isolation="none (answers are data)", warnings=warnings)


def grade_code(
    exercise: Exercise,
    submitted: SubmittedFiles,
    name_bugs: bool = True,
    trace: Trace | None = None,
    max_failures: int | None = None,
) -> Grade:
    """trace: where the session records the checks' requests (a fresh one if None)."""
    unusable = [f for f in exercise.files if f in submitted.problems]
    if unusable and len(unusable) == len(exercise.files):  # nothing of it can be graded
        return failed_grade(exercise, "invalid-submission", submitted.problems[unusable[0]])
    # the jail receives the files' bytes: the learner's folder is never written to, nor mounted
    names = {file.removesuffix(".py"): list(n) for file, n in exercise.names.items()}
    session = SubmissionSession(
        None,
        exercise.modules,
        exercise.limits,
        files=submitted.files,
        names=names,
        problems=submitted.problems,
        solution_dir=exercise_dir(exercise.id) / "solution",
    )
    session.toml = submitted.toml
    if trace is not None:
        session.trace = trace
    try:
        # the jail starts and imports the learner's modules while pytest collects the hidden
        # tests; `loaded` waits for it before the first check
        try:
            session.start()
        except JailError:
            pass  # `loaded` reports it
        collected = run_hidden_tests(
            exercise_dir(exercise.id) / "hidden",
            session,
            before_checks=lambda: loaded(session, exercise),
            exercise=exercise,
            max_failures=max_failures,
        )
        if collected.problem is not None:
            kind, message = collected.problem
            return assemble(
                exercise,
                [],
                [],
                GradeError(kind=kind, message=message),
                session.isolation,
                session.output(),
                submitted.warnings,
            )
        error = None
        if session.budget_exhausted:  # the checks after that point could not run
            error = GradeError(
                kind="timeout",
                message=msg(
                    "the submission used up its {seconds:g} s wall-clock budget; the checks it had not "
                    "reached by then fail",
                    seconds=session.limits.wall_seconds,
                ),
            )
        printed = session.output()  # what the checks printed: naming's reruns print nothing the learner sees
        diagnoses = list(collected.diagnoses)  # those the hidden tests made
        naming = time.monotonic()
        if name_bugs:
            # where a hidden test said what is wrong, "where the difference starts" adds nothing
            said = {d.check for d in diagnoses}
            named = named_bugs(exercise, session, collected.results)
            diagnoses += [d for d in named if not (d.level == "localized" and d.check in said)]
        graded = assemble(
            exercise,
            collected.results,
            diagnoses,
            error,
            session.isolation,
            printed,
            submitted.warnings,
        )
        return graded.model_copy(update={"naming_s": round(time.monotonic() - naming, 3)})
    finally:
        session.close()


def solution_trace(exercise: Exercise | str) -> dict[str, list[Event]]:
    """check id -> the requests its hidden test made of the exercise's solution, with the answers
    (grader.grading.replay): the grader's own inputs, on which a generated mutant can be compared."""
    exercise = load_exercise(exercise) if isinstance(exercise, str) else exercise
    submitted = read_submission(exercise, exercise_dir(exercise.id) / "solution")
    trace = Trace()
    grade_code(exercise, submitted, name_bugs=False, trace=trace)
    return {check: trace.events(check) for check in trace.checks}


def named_bugs(exercise: Exercise, session: SubmissionSession, results: list[CheckResult]) -> list[Diagnosis]:
    """The known bugs behind the failed checks, one explanation for the whole submission
    (grader.grading.fingerprints), the jail still there to tell candidates apart. Naming is a hint: its
    failure never costs a grade."""
    if all(r.passed for r in results):
        return []
    try:
        return Namer(exercise, session.trace, rerun=session.rerun).explain(results)
    except Exception as exc:  # noqa: BLE001
        print(f"grader: naming the bugs failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []


def loaded(session: SubmissionSession, exercise: Exercise) -> tuple[str, str] | None:
    """Wait for the learner's modules to be imported in the jail. (error kind, message) only when
    nothing can be graded: the jail died at import, or every learner file is unusable (a broken
    module, a malformed TOML file); otherwise each check that reaches a broken module or a
    missing name fails on its own (SubmissionSession._usable)."""
    try:
        session.ensure_jail()
    except JailError as exc:
        detail = exc.message
        if isinstance(exc, JailTimeout) and exc.where:
            detail = stopped_at(exc.message, exc.where)
        return exc.kind, msg("the submission could not be loaded: {detail}", detail=detail)
    usable_toml = [f for f in exercise.files if f.endswith(".toml") and f in session.toml]
    if exercise.modules and all(m in session.broken for m in exercise.modules) and not usable_toml:
        module = exercise.modules[0]
        error = session.import_errors.get(module)
        if error is not None:
            return import_problem(module, error, session.files)
        return "invalid-submission", session.problems.get(f"{module}.py") or session.broken[module]
    return None
