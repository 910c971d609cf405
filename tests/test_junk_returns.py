"""Learner code that returns junk (tests/adversarial/junk.py), graded through the real grading
path: every value, of whatever kind, ends as the learner's failure of the checks that read it,
with a teaching message; never an internal grader error, an `error` on the whole grade, or no
grade at all."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from adversarial.junk import DERIVED, FULL_SWEEP, JUNK, PRELUDE, SAMPLE, SAMPLE_SWEEP, replacement, target
from conftest import EXERCISES

import grader.grading.grade as grading

CASES = [(exercise, names, kind) for exercise, names in FULL_SWEEP for kind in JUNK] + [
    (exercise, names, kind) for exercise, names in SAMPLE_SWEEP for kind in SAMPLE
]


def junk_submission(exercise: str, names, kind: str, where: Path) -> Path:
    sub = where / "submission"
    shutil.copytree(EXERCISES / exercise / "solution", sub)
    by_file: dict[str, list[str]] = {}
    for name in names:
        by_file.setdefault(target(exercise, name).file, []).append(name)
    for file, replaced in by_file.items():
        path = sub / file
        path.write_text(path.read_text() + PRELUDE + "".join(replacement(n, kind) for n in replaced))
    return sub


@pytest.mark.parametrize(("exercise", "names", "kind"), CASES,
                         ids=[f"{e}:{'+'.join(n)}:{k}" for e, n, k in CASES])
def test_junk_is_the_learners_failure(exercise, names, kind, tmp_path):
    grade = json.loads(grading.grade(exercise, junk_submission(exercise, names, kind, tmp_path))
                       .model_dump_json())
    text = json.dumps(grade)[:3000]
    assert grade["error"] is None, text          # the submission loads: junk fails checks, one by one
    assert grade["passed"] is False or kind in DERIVED, text
    checks = {c["id"]: c for c in grade["checks"]}
    internal = [(c["id"], c["message"][:300]) for c in grade["checks"]
                if "internal grader error" in c["message"]]
    assert internal == [], internal
    for name in names:
        for check_id in target(exercise, name).checks:
            assert check_id in checks, f"{check_id} is not a check of {exercise}"
            if kind not in DERIVED:              # right in value for some names (see DERIVED)
                assert not checks[check_id]["passed"], f"{name} -> {kind}: {check_id} passed"
                assert checks[check_id]["message"], check_id


def test_a_value_that_stays_in_the_jail_is_named_by_its_type(tmp_path):
    """A generator (a handle here) is reported as the generator it is, not as the grader's proxy."""
    grade = grading.grade("day45-attention", junk_submission(
        "day45-attention", ("scaled_dot_product_attention",), "generator", tmp_path))
    check = next(c for c in grade.checks if c.id == "attention-matches-reference")
    assert "returned a generator; expected a torch tensor" in str(check.message), check.message
    assert "shape-mismatch" in check.symptoms


def test_a_constructor_that_returns_data_fails_naming_the_class(tmp_path):
    grade = grading.grade("day48-decoder", junk_submission("day48-decoder", ("GPT",), "one-tuple", tmp_path))
    check = next(c for c in grade.checks if c.id == "gpt-matches-reference")
    assert "gpt.GPT(...) returned a tuple; expected a new gpt.GPT object" in str(check.message), check.message


# -- the pure pieces, without a jail -------------------------------------------------------------

def test_a_tuple_subclass_crosses_as_a_tuple():
    """torch.Size and namedtuples are tuples: they cross as such (msgpack alone refuses them)."""
    import collections

    import torch

    from grader.jail import wire

    pair = collections.namedtuple("pair", "a b")
    for value, plain in [(torch.Size([2, 3]), (2, 3)), (pair(1, torch.Size([4])), (1, (4,)))]:
        back = wire.decode(wire.encode(value)[wire.PREFIX_BYTES:])
        assert back == plain and type(back) is tuple


def test_a_tensor_without_data_is_unsendable_not_an_exception_of_the_learner():
    import torch

    from grader.jail import wire

    with pytest.raises(wire.WireError, match="meta"):
        wire.encode(torch.empty(2, 3, device="meta"))


def test_junk_helpers_name_what_came_back():
    import torch

    from grader.testkit import CheckFailure, as_tensor, expect_tuple

    for value, named in [(None, "NoneType"), ((1, 2, 3), "3-tuple"), (torch.zeros(2), "Tensor")]:
        with pytest.raises(CheckFailure) as failure:
            expect_tuple(value, 2, "make_xy(chunk)")
        assert f"returned a {named}; expected a tuple of 2 values" in failure.value.message
    with pytest.raises(CheckFailure, match="returned a list; expected a torch tensor"):
        as_tensor([1.0], "f(x)")
