"""What hidden tests use besides the `submission` fixture: the check marker, teaching failures,
the tolerance rule, the synthetic corpus of the training probe, and the quiz answers' and
diagnosis sheets' judges. The one module a hidden test imports from the grader: what it needs
of the grader's packages is re-exported here, so their layout can change under it.

Hidden tests run in the trusted process. They hold reference results and compare with what came
back from the jail; they never import learner code.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NoReturn

import numpy as np
import pytest
import torch

from grader.catalog.answers import RealQuestion, check_answer  # noqa: F401  (re-exported for hidden tests)
from grader.catalog.diagnosis_sheet import (  # noqa: F401  (re-exported for hidden tests)
    AcceptedDiagnosis,
    judge_bug,
    symptom_letter,
)
from grader.grading.explore import (  # noqa: F401  (re-exported for hidden tests)
    FLOAT_DTYPES,
    batch_dims,
    conditioned_tolerance,
    corner,
    describe,
    explore,
    float_dtypes,
    magnitudes,
    random_tensor,
    seeds,
    sizes,
    tensors,
)
from grader.grading.failures import (  # noqa: F401  (re-exported for hidden tests)
    TOLERANCE_FACTOR,
    CheckFailure,
    Unusable,
    attach,
    fail,
    take_attachments,
    tolerance,
)
from grader.grading.session import Remote
from grader.jail.client import LearnerError  # re-exported for hidden tests, and used below
from grader.locale import N_, Message, join, msg  # noqa: F401  (re-exported for hidden tests)


def check(*, points: float, rule: str, day: int, title: str = "", needs: tuple[str, ...] = ()):
    """Mark a hidden test as a graded check worth `points`, for `rule` from curriculum `day`.

    needs: ids of checks whose functions this one builds on (e.g. the multi-head check needs
    "split-and-merge-heads"): when one of them fails too, the report groups this failure under
    it as its root cause. Points are still decided per check."""
    return pytest.mark.check(points=points, rule=rule, day=day, title=title, needs=tuple(needs))


def type_name(value) -> str:
    """What a learner's value is, for a message: one that stayed in the jail (a handle) is named
    by the type the jail reported, not as this side's proxy."""
    if isinstance(value, Remote):
        return str(vars(value).get("_type_name") or "object")[:100]
    return type(value).__name__


def as_tensor(value, what: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    fail(
        msg("{what} returned a {type}; expected a torch tensor", what=what, type=type_name(value)),
        symptoms=["shape-mismatch"],
    )


def expect_tuple(value, length: int, what: str) -> tuple:
    """The learner's tuple (or list) of `length` values, e.g. (x, y) or (logits, loss)."""
    if not isinstance(value, (tuple, list)) or len(value) != length:
        fail(
            msg(
                "{what} returned a {type}; expected a tuple of {n} values",
                what=what,
                type=type_name(value) if not isinstance(value, (tuple, list)) else f"{len(value)}-tuple",
                n=length,
            ),
            symptoms=["shape-mismatch"],
        )
    return tuple(value)


def construct(cls: Remote, *args, **kwargs) -> Remote:
    """`cls(*args, **kwargs)` for a learner's class: the result must be an object that stays in
    the jail (a module to load weights into and call), not a value that came back."""
    made = cls(*args, **kwargs)
    if not isinstance(made, Remote):
        fail(
            msg(
                "{what}(...) returned a {type}; expected a new {what} object (an nn.Module)",
                what=cls._label,
                type=type_name(made),
            ),
            symptoms=["shape-mismatch"],
        )
    return made


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


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def expect_dtype(actual: torch.Tensor, dtype: torch.dtype, what: str) -> torch.Tensor:
    """Fail unless `actual` is in the dtype the contract requires (the input's dtype).

    The tolerance of a check follows the required dtype, never the one that came back: a result
    cast to a coarser dtype would otherwise buy itself a coarser tolerance."""
    if actual.dtype != dtype:
        fail(
            msg(
                "{what} returned a {got} tensor; for {expected} inputs the result must be "
                "{expected} too (keep the input's dtype: do not cast the result).",
                what=what,
                got=dtype_name(actual.dtype),
                expected=dtype_name(dtype),
            ),
            symptoms=["value-mismatch"],
            got=dtype_name(actual.dtype),
            expected=dtype_name(dtype),
        )
    return actual


def expect_close(
    actual,
    expected: torch.Tensor,
    what: str,
    *,
    dtype: torch.dtype,
    reduction: int = 1,
    hint: str = "",
    nan_symptom: str = "value-mismatch",
    rule_hint: str = "",
    tol: float | Callable[[], float] | None = None,
):
    """Fail with a teaching message unless `actual` is a `dtype` tensor that matches `expected`
    within the tolerance rule for `dtype`: the dtype SPEC requires for this result (the input's),
    stated by the check, never read from what came back.

    `tol` replaces the rule's tolerance: a number, or a function that computes a larger one (e.g.
    `lambda: conditioned_tolerance(...)`), called only when the rule's own tolerance is not met,
    so that a result within the rule costs nothing more."""
    actual = expect_dtype(expect_shape(actual, expected.shape, what), dtype, what)
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
    rule = tolerance(dtype, reduction)
    if callable(tol):
        tol = rule if is_close(actual, expected, rule) else tol()
    elif tol is None:
        tol = rule
    if not is_close(actual, expected, tol):
        err = max_error(actual, expected)
        fail(
            msg(
                "{what} differs from the expected result by up to {err:.3g} (allowed {tol:.1g} "
                "for {dtype}). {hint}",
                what=what,
                err=err,
                tol=tol,
                dtype=dtype_name(dtype),
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


def randomize(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random weights of a realistic size, so that every part of the computation shows in the output.

    Norm gains near 1, biases near 0, matrices with unit-variance outputs, embeddings N(0, 1).
    A tied matrix is visited once (named_parameters skips the duplicate) and gets the embedding scale.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype)
            if name.endswith("bias"):
                p.copy_(0.2 * r)
            elif p.dim() == 1:
                p.copy_(1.0 + 0.2 * r)
            elif name.startswith(("wte.", "wpe.")):
                p.copy_(r)
            else:
                p.copy_(r / math.sqrt(p.shape[1]))
    return module


def markov_corpus(vocab_size: int, branching: int, length: int, seed: int = 0):
    """A random Markov chain: each token is followed by one of `branching` successors, uniformly.

    Its entropy rate is exactly ln(branching) nats per token, so no model that predicts the next
    token from the past can have an expected loss below it: the corpus's entropy floor. A loss far
    below it means the model sees its targets.
    """
    tokens, floor = _markov_chain(vocab_size, branching, length, seed)
    return tokens.clone(), floor


# made once per process: a Python loop over every token (10 ms), the same chain for each learner
@functools.lru_cache(maxsize=8)
def _markov_chain(vocab_size: int, branching: int, length: int, seed: int):
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
PROBE_TRAIN_TOKENS = 20_000
PROBE_HELD_OUT_TOKENS = 4_096  # the same chain, further on: text the run never trained on
PROBE_HELD_OUT_WINDOWS = 64


def reported_curve(losses, steps: int) -> list[float]:
    """The losses a jail reports, as data for the plot only: a list of at most `steps` floats,
    anything else in it NaN. No verdict reads them."""
    if not isinstance(losses, list):
        return []
    return [
        float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan
        for x in losses[:steps]
    ]


def _windows(data: torch.Tensor, block_size: int, count: int, generator: torch.Generator):
    starts = torch.randint(len(data) - block_size, (count,), generator=generator).tolist()
    x = torch.stack([data[i : i + block_size] for i in starts])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in starts])
    return x, y


def _learner_loss(model, x: torch.Tensor, y: torch.Tensor, vocab_size: int, what) -> float:
    """The cross-entropy of the learner's logits for x against y, computed here."""
    out = model(x)
    logits = out[0] if isinstance(out, tuple) and out else out
    logits = expect_shape(logits, (*x.shape, vocab_size), msg("the logits of {what}", what=what))
    if not logits.is_floating_point():
        return math.nan
    return _cross_entropy(logits, y, vocab_size)


def _cross_entropy(logits: torch.Tensor, y: torch.Tensor, vocab_size: int) -> float:
    """The mean next-token loss over every position, in float64 (the probe's one loss)."""
    return float(torch.nn.functional.cross_entropy(logits.double().reshape(-1, vocab_size), y.reshape(-1)))


def _trained_weights(submission, model, reference: torch.nn.Module, what) -> dict[str, torch.Tensor]:
    """The learner's trained weights, fetched as raw tensors and checked against the reference's
    names and shapes before anything is computed from them."""
    state = submission.state_dict(model)
    expected = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    if not isinstance(state, dict) or any(
        not isinstance(state.get(k), torch.Tensor) or tuple(state[k].shape) != shape
        for k, shape in expected.items()
    ):
        fail(
            msg(
                "after training, the state_dict of {what} does not hold the parameters the exercise "
                "names, with their shapes, so the trained weights cannot be evaluated.",
                what=what,
            ),
            symptoms=["shape-mismatch"],
        )
    return {k: state[k].detach().to(torch.float32) for k in expected}


def _untied(reference: torch.nn.Module) -> torch.nn.Module:
    """A copy of the reference whose head, if tied, is its own matrix: it computes what a model
    holding the fetched weights computes, tied or not."""
    import copy

    model = copy.deepcopy(reference)
    head, embedding = getattr(model, "lm_head", None), getattr(model, "wte", None)
    if head is not None and embedding is not None and head.weight is embedding.weight:
        head.weight = torch.nn.Parameter(embedding.weight.detach().clone())
    return model


class Probe:
    """What the grader measured of a training run, in its own process.

    first: the loss of the learner's model, holding the grader's initial weights, on the run's first
    batch; held_out: the loss of the trained learner model on held-out text of the same chain;
    reference_held_out: the loss of the reference holding the fetched trained weights there;
    finite: whether those weights are all finite. `reported` is the jail's curve, for the plot."""

    def __init__(self, *, first, held_out, reference_held_out, finite, reported: ProbeResult):
        self.first, self.held_out, self.reference_held_out = first, held_out, reference_held_out
        self.finite = finite
        self.reported = reported
        self.ln_v, self.floor = reported.ln_v, reported.floor


def training_probe(
    submission,
    model,
    reference: torch.nn.Module,
    *,
    vocab_size: int,
    block_size: int,
    steps: int = 150,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    what="GPT",
) -> Probe:
    """Train the learner's model in the jail on a corpus whose entropy rate is known, then judge
    the run from what the grader computes: `reference` holds the initial weights the caller loaded
    into `model`; the trained weights are fetched and evaluated here on held-out text."""
    corpus, floor = markov_corpus(
        vocab_size, PROBE_BRANCHING, PROBE_TRAIN_TOKENS + PROBE_HELD_OUT_TOKENS, seed=seed
    )
    data, held_out = corpus[:PROBE_TRAIN_TOKENS], corpus[PROBE_TRAIN_TOKENS:]
    # the run's first batch, drawn as the jail's training loop draws it (same generator, same seed)
    x0, y0 = _windows(data, block_size, batch_size, torch.Generator().manual_seed(seed))
    first = _learner_loss(model, x0, y0, vocab_size, what)
    losses = submission.train_lm(
        model, data, steps=steps, batch_size=batch_size, block_size=block_size, lr=lr, seed=seed
    )
    reported = ProbeResult(reported_curve(losses, steps), vocab_size, floor)
    weights = _trained_weights(submission, model, reference, what)
    finite = all(bool(torch.isfinite(w).all()) for w in weights.values())
    xh, yh = _windows(held_out, block_size, PROBE_HELD_OUT_WINDOWS, torch.Generator().manual_seed(seed + 1))
    reference_held_out = math.nan
    if finite:
        evaluator = _untied(reference)
        evaluator.load_state_dict(weights)
        with torch.no_grad():
            logits = evaluator(xh)[0]
        reference_held_out = _cross_entropy(logits, yh, vocab_size)
    held = _learner_loss(model, xh, yh, vocab_size, what)
    return Probe(
        first=first, held_out=held, reference_held_out=reference_held_out, finite=finite, reported=reported
    )


# A mean of the last 10 losses this far under the floor cannot come from learning the corpus: batch noise
# at these sizes is a few hundredths of a nat, so 0.25 nats below ln 4 means the targets are visible.
COLLAPSE_MARGIN = 0.25
FIRST_LOSS_TOLERANCE = 0.3  # with N(0, 0.02) weights the first logits are ~0: loss ~ ln(V)
# A correct model ends the probe near 1.5 nats from ln(V) = 3.5 (V = 32): one that has not come
# this far below ln(V), by its own forward or by the reference holding its weights, has not learned.
LEARNED_MARGIN = 0.5


def _nan_failure(what, step: int) -> NoReturn:
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


def _collapse_failure(what, low: float, floor: float) -> NoReturn:
    fail(
        msg(
            "the training loss of {what} fell to {low:.3f}, below the corpus's entropy floor "
            "{floor:.3f} (no honest next-token predictor can do better): the model is "
            "seeing the tokens it should predict. Check that the targets are shifted by one "
            "and that the causal mask blocks the future.",
            what=what,
            low=low,
            floor=floor,
        ),
        symptoms=["loss-collapse"],
        min_loss=low,
        floor=floor,
    )


def _first_loss_failure(what, first: float, ln_v: float) -> NoReturn:
    fail(
        msg(
            "the first loss of {what} was {first:.4f}; with small random weights every "
            "token is about equally likely, so it should be close to ln(V) = {ln_v:.4f}.",
            what=what,
            first=first,
            ln_v=ln_v,
        ),
        symptoms=["first-loss-off"],
        first_loss=first,
        ln_v=ln_v,
    )


def judge_probe(probe: Probe, what) -> None:
    """Fail with the training symptom a learner would see: NaN, collapse, first loss off, or no
    learning, each from a loss the grader computed. The reported curve is attached for the plot and
    names the step of a NaN in the message, nothing more."""
    attach(curve=probe.reported.curve())
    if not math.isfinite(probe.first):
        _nan_failure(what, 0)
    if not probe.finite or not math.isfinite(probe.held_out):
        reported = probe.reported.losses
        step = next((i for i, x in enumerate(reported) if not math.isfinite(x)), None)
        if step:
            _nan_failure(what, step)
        fail(
            msg(
                "after training, {what} holds NaN or inf weights or gives NaN/inf losses: a training "
                "step produced NaN gradients or updates.",
                what=what,
            ),
            symptoms=["nan-training"],
        )
    if probe.held_out < probe.floor - COLLAPSE_MARGIN:
        _collapse_failure(what, probe.held_out, probe.floor)
    if abs(probe.first - probe.ln_v) > FIRST_LOSS_TOLERANCE:
        _first_loss_failure(what, probe.first, probe.ln_v)
    learned = min(
        probe.held_out, probe.reference_held_out if math.isfinite(probe.reference_held_out) else math.inf
    )
    if learned > probe.ln_v - LEARNED_MARGIN:
        fail(
            msg(
                "after training, {what} gives a loss of {loss:.3f} on held-out text of the training "
                "corpus, no better than the untrained ln(V) = {ln_v:.3f}: training did not change "
                "the model as it should. Check that the loss reaches every parameter (no NaN or "
                "zero gradients) and that the optimizer updates the model's own Parameters.",
                what=what,
                loss=learned,
                ln_v=probe.ln_v,
            ),
            symptoms=["value-mismatch"],
            held_out_loss=learned,
            ln_v=probe.ln_v,
        )


def judge_training(probe: ProbeResult, what: str, *, check_first_loss: bool = True):
    """Judge a curve that learner code returned as its result (the bug hunt's own train()): it can
    fail a check (NaN, collapse, first loss off), never pass one alone; the bug hunt also runs
    `training_probe`, whose losses the grader computes itself.

    The losses are attached to the check's result either way, for the report's loss plot.
    """
    attach(curve=probe.curve())
    if not probe.losses or not all(math.isfinite(x) for x in probe.losses):
        step = next((i for i, x in enumerate(probe.losses) if not math.isfinite(x)), 0)
        _nan_failure(what, step)
    low = probe.tail_mean(10)
    if low < probe.floor - COLLAPSE_MARGIN:
        _collapse_failure(what, low, probe.floor)
    if check_first_loss and abs(probe.first - probe.ln_v) > FIRST_LOSS_TOLERANCE:
        _first_loss_failure(what, probe.first, probe.ln_v)
