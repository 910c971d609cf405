"""CI: `grader exercise check` for every shipped code exercise: solution and alternatives at full
marks, every hand-written mutant killed and named by a check of its rule, the starter caught,
and the auto-mutation score at the exercise's floor on a bounded sample (AUTO_BUDGET generated
mutants each, cached between runs). This replaces `grader mutants verify` in the suite: it grades
the same cases, exercise by exercise."""
import json

import pytest

from conftest import run_grader
from test_grading import CODE_EXERCISES

AUTO_BUDGET = 30  # per exercise: with the hand-written cases, all four within 10 minutes on 2 cores


@pytest.mark.parametrize("exercise", CODE_EXERCISES)
def test_exercise_check_is_green(exercise):
    proc = run_grader("exercise", "check", exercise, "--budget", AUTO_BUDGET, "--format", "json", timeout=1200)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = json.loads(proc.stdout)["rows"]
    red = [r for r in rows if not r["ok"]]
    assert proc.returncode == 0 and not red, red
    assert {r["kind"] for r in rows} >= {"files", "solution", "mutant", "auto"}
