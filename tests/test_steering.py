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

import grader.grading.grade as grading


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


# -- the pure pieces, without a jail -------------------------------------------------------------

def test_tolerance_follows_the_required_dtype_not_the_returned_one():
    import torch

    from grader.testkit import CheckFailure, expect_close

    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    expected = torch.softmax(x.double(), dim=-1)
    expect_close(torch.softmax(x, dim=-1), expected, "softmax", dtype=torch.float32, reduction=8)
    for returned in (torch.bfloat16, torch.float16, torch.float64):
        with pytest.raises(CheckFailure) as failure:
            expect_close(torch.softmax(x, dim=-1).to(returned), expected, "softmax", dtype=torch.float32,
                         reduction=8)
        assert failure.value.evidence == {"got": str(returned)[6:], "expected": "float32"}
    with pytest.raises(TypeError):                   # a check must say which dtype it requires
        expect_close(torch.softmax(x, dim=-1), expected, "softmax")  # type: ignore[call-arg]


def test_a_reported_curve_is_data_of_bounded_length():
    from grader.testkit import reported_curve

    assert reported_curve({"not": "a list"}, 10) == []
    curve = reported_curve([1, 2.5, "x", None, True, float("inf")] * 1000, 10)
    assert len(curve) == 10 and all(isinstance(x, float) for x in curve)
    assert curve[:2] == [1.0, 2.5] and all(x != x for x in curve[2:5])   # NaN for what is not a number
