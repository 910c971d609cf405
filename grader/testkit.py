"""What hidden tests use besides the `submission` fixture: the check marker, teaching failures,
the tolerance rule, and the synthetic corpus of the training probe.

Hidden tests run in the trusted process. They hold reference results and compare with what came
back from the jail; they never import learner code.
"""

from __future__ import annotations

import math
from typing import NoReturn

import numpy as np
import pytest
import torch

from grader.jail.client import LearnerError  # re-exported for hidden tests, and used below
from grader.locale import N_, Message, msg  # noqa: F401  (re-exported for hidden tests)


def check(*, points: float, rule: str, day: int, title: str = ""):
    """Mark a hidden test as a graded check worth `points`, for `rule` from curriculum `day`."""
    return pytest.mark.check(points=points, rule=rule, day=day, title=title)


class CheckFailure(AssertionError):
    """A failed check with its symptoms and diagnoses as data, not just text.

    `message` (and each diagnosis's "message") is best a `msg(...)`: English text that keeps its
    template and params, so the report can show it in the learner's language.
    """

    def __init__(self, message: str, symptoms=(), diagnosis=(), evidence=None):
        super().__init__(message)
        self.message = message
        self.symptoms = list(symptoms)
        self.diagnosis = list(diagnosis)  # [{"rule", "day", "mutant", "message"}]
        self.evidence = dict(evidence or {})


def fail(message: str, *, symptoms=(), diagnosis=(), **evidence) -> NoReturn:
    raise CheckFailure(message, symptoms=symptoms, diagnosis=diagnosis, evidence=evidence)


# -- data a check attaches to its result, pass or fail (the runner collects it) -----------------

_ATTACHED: dict = {}


def attach(**data) -> None:
    """Attach data to the result of the check now running (e.g. curve=TrainingCurve)."""
    _ATTACHED.update(data)


def take_attachments() -> dict:
    data = dict(_ATTACHED)
    _ATTACHED.clear()
    return data


# The tolerance rule: a result computed in `dtype` whose entries each sum `reduction` terms may
# differ from the float64 truth by about eps * sqrt(reduction) (random-walk rounding); we allow 32
# times that, relative and absolute, so any correct order of operations passes while a real bug
# (a wrong scale, a missing term) is orders of magnitude larger. Never tuned per check.
TOLERANCE_FACTOR = 32.0


def tolerance(dtype: torch.dtype, reduction: int = 1) -> float:
    eps = torch.finfo(dtype).eps
    return TOLERANCE_FACTOR * eps * math.sqrt(max(reduction, 1))


def as_tensor(value, what: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    fail(
        msg("{what} returned a {type}; expected a torch tensor", what=what, type=type(value).__name__),
        symptoms=["shape-mismatch"],
    )


def expect_shape(actual, shape, what: str) -> torch.Tensor:
    actual = as_tensor(actual, what)
    if tuple(actual.shape) != tuple(shape):
        fail(
            msg(
                "{what} returned shape {got}; expected {expected}",
                what=what,
                got=tuple(actual.shape),
                expected=tuple(shape),
            ),
            symptoms=["shape-mismatch"],
            got=list(actual.shape),
            expected=list(shape),
        )
    return actual


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    a, e = actual.to(torch.float64), expected.to(torch.float64)
    both_nan = torch.isnan(a) & torch.isnan(e)
    diff = torch.where(both_nan, torch.zeros_like(a), (a - e).abs())
    return float(torch.nan_to_num(diff, nan=math.inf).max()) if diff.numel() else 0.0


def is_close(actual: torch.Tensor, expected: torch.Tensor, tol: float) -> bool:
    a, e = actual.to(torch.float64), expected.to(torch.float64)
    if a.shape != e.shape:
        return False
    return bool(torch.allclose(a, e, rtol=tol, atol=tol, equal_nan=False))


def expect_close(
    actual,
    expected: torch.Tensor,
    what: str,
    *,
    dtype: torch.dtype | None = None,
    reduction: int = 1,
    hint: str = "",
    nan_symptom: str = "value-mismatch",
    rule_hint: str = "",
):
    """Fail with a teaching message unless `actual` matches `expected` within the tolerance rule."""
    actual = expect_shape(actual, expected.shape, what)
    dtype = dtype or (actual.dtype if actual.is_floating_point() else torch.float32)
    if actual.is_floating_point() and not torch.isfinite(actual).all() and torch.isfinite(expected).all():
        bad = (~torch.isfinite(actual)).nonzero()[0].tolist()
        fail(
            msg(
                "{what} contains NaN or inf (first at index {index}) where the correct result is "
                "finite. {hint}",
                what=what,
                index=bad,
                hint=hint,
            ),
            symptoms=[nan_symptom],
            index=bad,
        )
    tol = tolerance(dtype, reduction)
    if not is_close(actual, expected, tol):
        err = max_error(actual, expected)
        fail(
            msg(
                "{what} differs from the expected result by up to {err:.3g} (allowed {tol:.1g} "
                "for {dtype}). {hint}",
                what=what,
                err=err,
                tol=tol,
                dtype=str(dtype).replace('torch.', ''),
                hint=hint,
            ),
            symptoms=["value-mismatch"],
            max_error=err,
            tolerance=tol,
        )
    return actual


def expect_raises(call, error_type: str, what: str, hint: str = ""):
    """Run `call()`; pass if the learner's code raised `error_type`."""
    try:
        call()
    except LearnerError as exc:
        if exc.is_a(error_type):
            return exc
        if exc.is_a("NotImplementedError"):
            raise
        fail(
            msg(
                "{what} raised {type}; expected {expected}. {hint}",
                what=what,
                type=exc.type_name,
                expected=error_type,
                hint=hint,
            ),
            symptoms=["exception"],
        )
    fail(
        msg(
            "{what} returned normally; expected it to raise {expected}. {hint}",
            what=what,
            expected=error_type,
            hint=hint,
        )
    )


# -- the training probe's corpus -----------------------------------------------------------------


def markov_corpus(vocab_size: int, branching: int, length: int, seed: int = 0):
    """A random Markov chain: each token is followed by one of `branching` successors, uniformly.

    Its entropy rate is exactly ln(branching) nats per token, so no model that predicts the next
    token from the past can have an expected loss below it: the corpus's entropy floor. A loss far
    below it means the model sees its targets.
    """
    rng = np.random.default_rng(seed)
    successors = np.stack([rng.choice(vocab_size, size=branching, replace=False) for _ in range(vocab_size)])
    tokens = np.empty(length, dtype=np.int64)
    tokens[0] = rng.integers(vocab_size)
    picks = rng.integers(branching, size=length)
    for i in range(1, length):
        tokens[i] = successors[tokens[i - 1], picks[i]]
    return torch.from_numpy(tokens), math.log(branching)


CURVE_POINTS = 2000  # a report plots at most this many points of a training run


class ProbeResult:
    """Losses of a short training run on the Markov corpus, with the two lines they are judged by."""

    def __init__(self, losses: list[float], vocab_size: int, floor: float):
        self.losses = [float(x) for x in losses]
        self.ln_v = math.log(vocab_size)
        self.floor = floor

    @property
    def first(self) -> float:
        return self.losses[0] if self.losses else math.nan

    def tail_mean(self, n: int = 20) -> float:
        tail = self.losses[-n:]
        return sum(tail) / len(tail) if tail else math.nan

    def curve(self, max_points: int = CURVE_POINTS):
        """The losses for a report's plot: NaN/inf as None, a long run thinned to max_points."""
        from grader.models import TrainingCurve

        stride = max(1, math.ceil(len(self.losses) / max_points))
        kept = self.losses[::stride]
        return TrainingCurve(
            losses=[x if math.isfinite(x) else None for x in kept],
            ln_v=self.ln_v,
            floor=self.floor,
            stride=stride,
            steps=len(self.losses),
        )


PROBE_BRANCHING = 4  # each token has 4 possible successors: entropy floor ln 4 = 1.386


def training_probe(
    submission,
    model,
    *,
    vocab_size: int,
    block_size: int,
    steps: int = 150,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
) -> ProbeResult:
    """Train the learner's model in the jail on a corpus whose entropy rate is known."""
    data, floor = markov_corpus(vocab_size, PROBE_BRANCHING, 20_000, seed=seed)
    losses = submission.train_lm(
        model, data, steps=steps, batch_size=batch_size, block_size=block_size, lr=lr, seed=seed
    )
    return ProbeResult(losses, vocab_size, floor)


# A mean of the last 10 losses this far under the floor cannot come from learning the corpus: batch noise
# at these sizes is a few hundredths of a nat, so 0.25 nats below ln 4 means the targets are visible.
COLLAPSE_MARGIN = 0.25
FIRST_LOSS_TOLERANCE = 0.3  # with N(0, 0.02) weights the first logits are ~0: loss ~ ln(V)


def judge_training(probe: ProbeResult, what: str, *, check_first_loss: bool = True):
    """Fail with the training symptom a learner would see: NaN, first loss off, collapse.

    The losses are attached to the check's result either way, for the report's loss plot.
    """
    attach(curve=probe.curve())
    if not probe.losses or not all(math.isfinite(x) for x in probe.losses):
        step = next((i for i, x in enumerate(probe.losses) if not math.isfinite(x)), 0)
        symptom = "nan-forward" if step == 0 else "nan-training"
        if step == 0:
            message = msg(
                "training {what} gave a NaN/inf loss at step {step} (the very first forward pass).",
                what=what,
                step=step,
            )
        else:
            message = msg("training {what} gave a NaN/inf loss at step {step}.", what=what, step=step)
        fail(message, symptoms=[symptom], step=step)
    low = probe.tail_mean(10)
    if low < probe.floor - COLLAPSE_MARGIN:
        fail(
            msg(
                "the training loss of {what} fell to {low:.3f}, below the corpus's entropy floor "
                "{floor:.3f} (no honest next-token predictor can do better): the model is "
                "seeing the tokens it should predict. Check that the targets are shifted by one "
                "and that the causal mask blocks the future.",
                what=what,
                low=low,
                floor=probe.floor,
            ),
            symptoms=["loss-collapse"],
            min_loss=low,
            floor=probe.floor,
        )
    if check_first_loss and abs(probe.first - probe.ln_v) > FIRST_LOSS_TOLERANCE:
        fail(
            msg(
                "the first loss of {what} was {first:.4f}; with small random weights every "
                "token is about equally likely, so it should be close to ln(V) = {ln_v:.4f}.",
                what=what,
                first=probe.first,
                ln_v=probe.ln_v,
            ),
            symptoms=["first-loss-off"],
            first_loss=probe.first,
            ln_v=probe.ln_v,
        )
