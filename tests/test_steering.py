"""Submissions that try to steer their verdict through what the jail reports
(tests/adversarial/steering.py), graded through the real grading path: each fails the checks
it names with their rules, and no value the jail reported about itself passes a check."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from adversarial.steering import CASES
from conftest import EXERCISES

import grader.grading as grading


def submission_of(case, where: Path) -> Path:
    sub = where / "submission"
    shutil.copytree(EXERCISES / case.exercise / "solution", sub)
    target = sub / case.file
    target.write_text(target.read_text() + "\n# --- the attack ---\n" + case.code)
    return sub


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_steering_fails_with_the_right_rule(case, tmp_path):
    grade = json.loads(grading.grade(case.exercise, submission_of(case, tmp_path)).model_dump_json())
    text = json.dumps(grade)[:3000]
    assert grade["passed"] is False and grade["error"] is None, text
    checks = {c["id"]: c for c in grade["checks"]}
    for check_id, rule in case.failing.items():
        check = checks[check_id]
        assert not check["passed"], f"{case.name}: {check_id} passed: {json.dumps(check)[:2000]}"
        assert check["rule"] == rule, json.dumps(check)[:2000]
        assert "internal grader error" not in check["message"], check["message"]
    for check_id, symptom in case.symptoms.items():
        assert symptom in checks[check_id]["symptoms"], json.dumps(checks[check_id])[:2000]


def test_a_forged_curve_is_only_plotted(tmp_path):
    """The forged curve still reaches the plot (capped, as data), but the probe failed on NaN."""
    case = next(c for c in CASES if c.name == "forged-worker-untied-nan-gradients")
    grade = grading.grade(case.exercise, submission_of(case, tmp_path))
    probe = next(c for c in grade.checks if c.id == "training-probe")
    assert not probe.passed and "nan-training" in probe.symptoms
    assert probe.curve is not None and len(probe.curve.losses) <= 100
    assert all(x is not None for x in probe.curve.losses)      # the forgery, plotted as it came


def test_the_worker_is_not_importable_by_name(tmp_path):
    """Learner code finds no `worker`, `wire` or `sandbox` module by name (a hurdle only)."""
    sub = tmp_path / "submission"
    shutil.copytree(EXERCISES / "day45-attention" / "solution", sub)
    target = sub / "attention.py"
    target.write_text(target.read_text() + '''
import importlib.util as _util, sys as _sys
_reachable = [n for n in ("worker", "wire", "sandbox") if n in _sys.modules or _util.find_spec(n)]
if _reachable:
    def merge_heads(x):
        raise RuntimeError("reachable: " + ", ".join(_reachable))
''')
    grade = grading.grade("day45-attention", sub)
    failing = [c for c in grade.checks if not c.passed]
    assert not failing, [(c.id, c.message) for c in failing]
