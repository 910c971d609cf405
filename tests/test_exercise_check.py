"""CI: `grader exercise check` for every shipped code exercise: solution and alternatives at full
marks, every hand-written mutant killed by a check of its rule and named as fact (and nothing
else), the starter caught and its bugs named, a sample of pairs of known bugs named at the
floors of `grader mutants compose` (grader.mutation.authoring.COMPOSE_SAMPLE pairs each), and the
auto-mutation score at the exercise's floor on a bounded sample (AUTO_BUDGET generated mutants
each, cached between runs). This replaces `grader mutants verify` in the suite: it grades
the same cases, exercise by exercise.

The check's core runs here, its cases graded through the suite's grade store (each case graded
once per run, and the same grades asserted on by tests/test_store_grades.py); the command line
around it (`grader exercise check`, exit code and JSON) is run for real by tests/test_authoring.py."""
import json

import pytest

from grader.mutation.authoring import check_exercise
from test_grading import CODE_EXERCISES

AUTO_BUDGET = 30  # per exercise: with the hand-written cases, all four within 10 minutes on 2 cores


@pytest.mark.parametrize("exercise", CODE_EXERCISES)
def test_exercise_check_is_green(exercise, corpus_grades):
    summary = check_exercise(exercise, budget=AUTO_BUDGET, grade_with=corpus_grades.grade)
    rows = json.loads(summary.model_dump_json())["rows"]
    red = [r for r in rows if not r["ok"]]
    assert summary.ok and not red, red
    assert {r["kind"] for r in rows} >= {"files", "solution", "mutant", "compose", "auto"}
