"""Learner-style day49 cases the mutant set does not hold, each graded through the same path as
`grader grade`: the check that must fail (and only it, where one clause is broken), the rule and
diagnosis it must name, and correct formulations that must keep full marks."""

import shutil
from pathlib import Path

import pytest

from grader.grading.grade import grade
from grader.models import Grade

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = ROOT / "exercises"

DATA_LOSS = "    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))"
DATA_STARTS = "ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)"
HUNT_FILL = '    scores = scores.masked_fill(mask, float("-inf"))'
HUNT_SCALE = "/ math.sqrt(d_k)"


def graded(tmp_path, exercise: str, find: str, replace: str) -> Grade:
    """The exercise's solution with one line rewritten as a learner would write it, graded."""
    target = tmp_path / "submission"
    shutil.copytree(EXERCISES / exercise / "solution", target)
    path = target / ("data.py" if exercise == "day49-data" else "bughunt.py")
    text = path.read_text()
    assert text.count(find) == 1, find
    path.write_text(text.replace(find, replace))
    return grade(exercise, path.parent)


def failing(result: Grade) -> dict[str, str]:
    return {c.id: c.message for c in result.checks if not c.passed}


@pytest.mark.parametrize(
    "loss",
    [
        # CS336 style: logsumexp minus the target's logit; around 500 it cancels in float32
        "    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)\n"
        "    return (torch.logsumexp(logits, -1) - picked).mean()",
        "    return -(F.log_softmax(logits, -1) * F.one_hot(targets, V)).sum(-1).mean()",
    ],
)
def test_correct_losses_keep_full_marks_on_large_logits(tmp_path, loss):
    result = graded(tmp_path, "day49-data", DATA_LOSS, loss)
    assert failing(result) == {} and result.score == result.max_score


def test_a_loss_that_shifts_again_is_a_target_shift_not_a_flattening_bug(tmp_path):
    # Hugging Face models shift inside the loss; here the data is already shifted
    result = graded(
        tmp_path,
        "day49-data",
        DATA_LOSS,
        "    return F.cross_entropy(logits[..., :-1, :].reshape(-1, V), targets[..., 1:].reshape(-1))",
    )
    assert set(failing(result)) == {"lm-loss-does-not-shift-again"}
    assert "shifts the targets again" in failing(result)["lm-loss-does-not-shift-again"]
    assert {d.rule for d in result.diagnosis} == {"target-shift"}
    assert {d.mutant for d in result.diagnosis} == {"targets-shifted-twice"}


def test_make_xy_shifting_twice_is_named_as_such(tmp_path):
    result = graded(
        tmp_path, "day49-data", "    return chunk[:-1], chunk[1:]", "    return chunk[:-2], chunk[2:]"
    )
    assert "shifted twice" in failing(result)["make-xy-shifts-targets-by-one"]
    assert {c.rule for c in result.checks if not c.passed} <= {"target-shift", "data-windows"}
    assert [d.rule for d in result.diagnosis] == ["target-shift"]


def test_log_of_softmax_fails_with_a_log_space_hint_not_the_flattening_one(tmp_path):
    result = graded(
        tmp_path,
        "day49-data",
        DATA_LOSS,
        "    return -torch.log(torch.softmax(logits, -1).gather(-1, targets.unsqueeze(-1))).mean()",
    )
    assert set(failing(result)) == {"lm-loss-is-stable-for-large-logits"}
    message = failing(result)["lm-loss-is-stable-for-large-logits"]
    assert "log space" in message and "Flatten" not in message
    assert "Smallest failing input of lm_loss found" in message


def test_a_sampler_that_misses_a_tenth_of_the_starts_fails_uniformity(tmp_path):
    result = graded(
        tmp_path,
        "day49-data",
        DATA_STARTS,
        "ix = torch.randint(max(1, (len(data) - block_size) * 9 // 10), (batch_size,), generator=generator)",
    )
    assert set(failing(result)) == {"get-batch-draws-every-start-uniformly"}


def test_a_float32_minimum_fill_fails_only_half_precision(tmp_path):
    result = graded(
        tmp_path,
        "day49-bughunt",
        HUNT_FILL,
        "    scores = scores.masked_fill(mask, torch.finfo(torch.float32).min)",
    )
    assert set(failing(result)) == {"attention-in-half-precision"}
    assert "fp16-overflow" in result.symptoms
    assert [(d.rule, d.day) for d in result.diagnosis] == [("numerical-stability", 45)]


def test_a_scale_fixed_for_one_head_size_fails_only_the_scale_check(tmp_path):
    result = graded(tmp_path, "day49-bughunt", HUNT_SCALE, "/ math.sqrt(8)")
    assert set(failing(result)) == {"attention-scale"}
    assert "d_k = 16" in failing(result)["attention-scale"]
