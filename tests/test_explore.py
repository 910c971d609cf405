"""grader.grading.explore: hidden tests explore a contract with hypothesis, deterministically, report the
smallest failing input, never repeat a jail error, and tolerate what the problem's conditioning
makes unavoidable."""

from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

from grader.grading import explore as ex
from grader.errors import JailTimeout, LearnerError
from grader.testkit import (
    CheckFailure,
    Unusable,
    conditioned_tolerance,
    expect_close,
    explore,
    fail,
    msg,
    tolerance,
)


def failing_from(threshold):
    calls = []

    def prop(n):
        calls.append(n)
        if n >= threshold:
            fail(msg("{n} is too large", n=n), symptoms=["value-mismatch"], got=n)

    return prop, calls


def test_a_failure_is_shrunk_to_the_smallest_failing_case():
    prop, _ = failing_from(37)
    with pytest.raises(CheckFailure) as caught:
        explore(st.integers(0, 10_000), prop, what="f")
    failure = caught.value
    assert failure.evidence["input"] == "37"
    assert failure.evidence["got"] == 37  # the smallest case's own evidence
    assert failure.symptoms == ["value-mismatch"]
    assert str(failure).startswith("37 is too large")
    assert "Smallest failing input of f found: 37" in str(failure)
    assert failure.message.params["failure"].params == {"n": 37}  # translatable: the message kept


def test_tensor_cases_shrink_to_the_smallest_shape_and_show_their_values():
    def prop(x):
        if x.numel() >= 3:
            fail(msg("too many entries"))

    shapes = st.tuples(ex.batch_dims(), ex.sizes(1, 9))
    with pytest.raises(CheckFailure) as caught:
        explore(ex.tensors(shapes.map(lambda s: (*s[0], s[1]))), prop)
    shown = caught.value.evidence["input"]
    assert shown.startswith("tensor([") and shown.endswith("dtype=float32)")
    assert shown.count(",") == 3  # three values, then the dtype: a (3,) tensor


def test_a_case_that_passes_is_silent_and_draws_bounded_examples(capsys):
    calls = []
    explore(st.integers(), calls.append, examples=20)
    assert 1 <= len(calls) <= 20
    assert capsys.readouterr() == ("", "")


def test_exploring_is_deterministic():
    def prop(x):
        if float(x.abs().max()) > 2.5:
            fail(msg("large entry {v:.6f}", v=float(x.abs().max())))

    messages = []
    for _ in range(2):
        with pytest.raises(CheckFailure) as caught:
            explore(ex.tensors(st.tuples(ex.sizes(1, 50))), prop, examples=30)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_a_jail_error_is_raised_at_once_never_shrunk():
    calls = []

    def prop(n):
        calls.append(n)
        if n > 5:
            raise JailTimeout(msg("the call took too long"))

    with pytest.raises(JailTimeout):
        explore(st.integers(0, 1000), prop)
    assert sum(1 for n in calls if n > 5) == 1


def test_a_missing_name_is_raised_at_once_without_an_input():
    calls = []

    def prop(n):
        calls.append(n)
        raise Unusable(msg("attention.py does not define stable_softmax"), symptoms=["exception"])

    with pytest.raises(Unusable) as caught:
        explore(st.integers(), prop, corners=[1])
    assert len(calls) == 1
    assert "input" not in caught.value.evidence


def test_not_implemented_is_raised_at_once():
    calls = []

    def prop(n):
        calls.append(n)
        raise LearnerError({"type": "NotImplementedError", "message": "", "mro": ["NotImplementedError"]})

    with pytest.raises(LearnerError):
        explore(st.integers(), prop)
    assert len(calls) == 1


def test_a_learner_exception_is_a_failing_case_with_its_input():
    def prop(n):
        if n >= 4:
            raise LearnerError({"type": "IndexError", "message": "out of range", "where": "a.py:3"})

    with pytest.raises(CheckFailure) as caught:
        explore(st.integers(0, 100), prop)
    assert caught.value.evidence["input"] == "4"
    assert "IndexError" in str(caught.value) and caught.value.symptoms == ["exception"]


def test_a_bug_in_the_hidden_test_is_not_shrunk():
    calls = []

    def prop(n):
        calls.append(n)
        raise TypeError("the check's own bug")

    with pytest.raises(TypeError):
        explore(st.integers(), prop)
    assert len(calls) == 1


def test_shrinking_is_bounded():
    calls = []

    def prop(n):
        calls.append(n)
        fail(msg("always"))

    with pytest.raises(CheckFailure):
        explore(st.lists(st.integers(), min_size=40, max_size=60), prop, examples=5)
    assert len(calls) <= 5 + ex.SHRINK_CALLS + 1


def test_a_corner_case_the_strategy_misses_is_reported_as_written():
    prop, calls = failing_from(500)
    with pytest.raises(CheckFailure) as caught:
        explore(st.integers(0, 100), prop, corners=[500, 600])
    assert calls[-1] == 500  # after the drawn cases, and the first failing corner ends it
    assert "Failing input: 500" in str(caught.value)


def test_a_failure_found_by_exploring_is_shown_before_any_corner():
    prop, calls = failing_from(7)
    with pytest.raises(CheckFailure) as caught:
        explore(st.integers(0, 100), prop, corners=[500])
    assert 500 not in calls
    assert caught.value.evidence["input"] == "7"


def test_no_example_database_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prop, _ = failing_from(3)
    with pytest.raises(CheckFailure):
        explore(st.integers(0, 100), prop)
    assert list(tmp_path.iterdir()) == []


def test_describe_shows_shapes_dtypes_flags_and_small_values():
    z = torch.tensor([500.0, float("-inf")], dtype=torch.float16)
    big = torch.full((2, 3, 5), 3.0, dtype=torch.bfloat16)
    mask = torch.zeros(2, 5, dtype=torch.bool)
    shown = ex.describe({"z": z, "big": big, "mask": mask, "causal": True, "dtype": torch.float16})
    assert shown == (
        "z=tensor([500, float('-inf')], dtype=float16), "
        "big=bfloat16 tensor of shape (2, 3, 5), |values| up to 3, "
        "mask=bool tensor of shape (2, 5) (0 True), causal=True, dtype=float16"
    )


# -- the conditioned tolerance -------------------------------------------------------------------


def softmax64(z):
    return torch.softmax(z, dim=-1)


def test_logsumexp_softmax_of_large_logits_passes_with_the_conditioned_tolerance_only():
    z = torch.tensor([[500.0, 502.0], [88.0, 90.0], [-1000.0, -1001.0]])
    got = torch.exp(z - torch.logsumexp(z, dim=-1, keepdim=True))
    expected = softmax64(z.double())
    with pytest.raises(CheckFailure):  # the eps*sqrt(n) rule alone refuses this correct formula
        expect_close(got, expected, "softmax", dtype=torch.float32, reduction=2)
    tol = conditioned_tolerance(softmax64, [z], torch.float32, reduction=2)
    assert tol > tolerance(torch.float32, 2)
    expect_close(got, expected, "softmax", dtype=torch.float32, tol=tol)


@pytest.mark.parametrize(
    "wrong",
    [
        lambda z: torch.softmax(z, dim=0),  # the wrong dim
        lambda z: torch.softmax(z / 2, dim=-1),  # a wrong temperature
        lambda z: torch.softmax(z, dim=-1) * 0.999,  # not normalised
    ],
)
def test_the_conditioned_tolerance_still_refuses_wrong_softmaxes(wrong):
    z = torch.tensor([[500.0, 502.0], [88.0, 90.0], [-1000.0, -1001.0]])
    tol = conditioned_tolerance(softmax64, [z], torch.float32, reduction=2)
    with pytest.raises(CheckFailure):
        expect_close(wrong(z), softmax64(z.double()), "softmax", dtype=torch.float32, tol=tol)


def test_conditioned_tolerance_is_seeded_and_passes_masks_through():
    z = ex.random_tensor((3, 4), scale=50.0)
    mask = torch.tensor([True, False, False, True])

    def masked(z, mask):
        return torch.softmax(z.masked_fill(mask, float("-inf")), dim=-1)

    first = conditioned_tolerance(masked, [z, mask], torch.float16, reduction=4)
    assert first == conditioned_tolerance(masked, [z, mask], torch.float16, reduction=4)
    assert first < 1  # -inf entries stay -inf: they move nothing


def test_a_saturated_logsumexp_softmax_passes_with_the_exponential_allowance():
    z = torch.tensor([26600.0, 10000.0, -5000.0, 26590.0])  # the winner's exponent rounds at 2.7e4
    got = torch.exp(z - torch.logsumexp(z, dim=-1, keepdim=True))
    expected = softmax64(z.double())
    tol = conditioned_tolerance(softmax64, [z], torch.float32, reduction=4)
    with pytest.raises(CheckFailure):  # no perturbation of z moves a saturated softmax
        expect_close(got, expected, "softmax", dtype=torch.float32, tol=tol)
    tol = conditioned_tolerance(softmax64, [z], torch.float32, reduction=4, exponential=True)
    expect_close(got, expected, "softmax", dtype=torch.float32, tol=tol)
    floored = torch.zeros_like(z)  # the softmax-max-floor mutant's zeros stay refused
    with pytest.raises(CheckFailure):
        expect_close(floored, expected, "softmax", dtype=torch.float32, tol=tol)


# -- explored hidden tests, graded for real --------------------------------------------------------


def test_a_mutant_graded_twice_gets_the_same_grade_and_nothing_is_written_beside_the_tests(tmp_path):
    """The day45 checks explore with hypothesis inside the grader's own pytest run: the smallest
    failing input, and so every message, is the same on every grading, and hypothesis leaves no
    example database (.hypothesis) in the exercise's folder."""
    from grader.catalog.exercises import EXERCISES_DIR
    from grader.grading.grade import grade
    from grader.catalog.mutants import apply_mutant, load_mutants

    mutant = next(m for m in load_mutants() if m.id == "causal-bottom-right")
    path = apply_mutant(mutant, "day45-attention", tmp_path / "submission")
    before = sorted(p.name for p in (EXERCISES_DIR / "day45-attention").rglob("*"))
    first, second = grade("day45-attention", path), grade("day45-attention", path)
    failed = [(c.id, c.message, c.evidence) for c in first.checks if not c.passed]
    assert failed and failed == [(c.id, c.message, c.evidence) for c in second.checks if not c.passed]
    shown = dict((cid, message) for cid, message, _ in failed)["causal-attention-matches-reference"]
    assert "Smallest failing input of scaled_dot_product_attention found" in shown
    # the bug is named by replaying the check's calls on the mutants, not by the hidden test
    assert "causal-bottom-right" in {d.mutant for d in first.diagnosis}
    assert sorted(p.name for p in (EXERCISES_DIR / "day45-attention").rglob("*")) == before
    assert not list(EXERCISES_DIR.rglob(".hypothesis"))
