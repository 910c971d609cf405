"""Hidden tests for day48-decoder: the learner's norms.py, positions.py, attention.py and gpt.py
against reference_model.

Weights are the grader's: each test builds a reference module, gives it random weights, loads the
same weights into the learner's module by SPEC's attribute names, and compares outputs on inputs
the learner never sees. A known bug is not recomputed here: when a check fails, the grader replays
its calls on the exercise's mutants and names the one whose answers match (grader.grading.fingerprints).
"""
import math
import re

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

import reference_model as ref
from grader.testkit import (
    randomize,
    CheckFailure,
    LearnerError,
    as_tensor,
    check,
    conditioned_tolerance,
    construct,
    expect_close,
    expect_dtype,
    expect_raises,
    expect_shape,
    explore,
    fail,
    is_close,
    join,
    judge_probe,
    msg,
    tolerance,
    training_probe,
    type_name,
)

# Curriculum days of the rules this exercise grades (seeds: day 46 normalisation and Pre-LN
# residuals, day 47 the FFN and the block's parameter ledger, day 48 positions, tying, full GPT).
NORM_DAY, FFN_DAY, POSITIONS_DAY, GPT_DAY = 46, 47, 48, 48

PRE_LN = "x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))"

# The seed's toy GPT (day 49 review): 28,608 parameters with the head tied, 3,200 more untied.
TOY = dict(vocab_size=100, block_size=16, d_model=32, n_layer=2, n_head=4)
TOY_TIED, TOY_UNTIED = 28_608, 31_808


# -- arrange ---------------------------------------------------------------------------------------

def randn(*shape, seed=0, scale=1.0, shift=0.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift).to(dtype)


def tokens(B, T, vocab_size, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(vocab_size, (B, T), generator=g)



def pair(submission, reference, learner, seed):
    """Random weights in `reference`, the same weights loaded into the learner's module."""
    randomize(reference, seed)
    submission.load(learner, reference.state_dict())
    return reference, learner


def gpt_pair(submission, cfg: dict, seed: int):
    reference = ref.GPT(ref.GPTConfig(**cfg))
    learner = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**cfg))
    return pair(submission, reference, learner, seed)


def describe_config(cfg: dict) -> str:
    return "GPTConfig(" + ", ".join(f"{k}={v}" for k, v in cfg.items()) + ")"


def gpt_forward(model, idx, targets=None, what="GPT"):
    """Call the learner's GPT and check that it returns (logits, loss) as SPEC says."""
    out = model(idx) if targets is None else model(idx, targets)
    if not isinstance(out, tuple) or len(out) != 2:
        fail(msg("{what}.forward returned a {type}; expected the tuple (logits, loss), with loss "
                 "None when no targets are given", what=what, type=type_name(out)),
             symptoms=["shape-mismatch"])
    return out


def gpt_reduction(cfg: dict) -> int:
    """Terms summed on the way to a logit: each block's d_model and d_ff sums, then the head's."""
    d_ff = cfg.get("d_ff") or 4 * cfg["d_model"]
    return cfg["n_layer"] * (cfg["d_model"] + d_ff) + cfg["d_model"]


def same(a, b, tol) -> bool:
    """Close within tol, with NaN only where the other has NaN too (for comparing the learner's
    results with the learner's own parts: a NaN they share comes from a part checked elsewhere)."""
    a, b = a.double(), b.double()
    if a.shape != b.shape or not torch.equal(torch.isnan(a), torch.isnan(b)):
        return False
    return is_close(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0), tol)


# -- LayerNorm and RMSNorm (day 46) ------------------------------------------------------------------

# The norms' input space: batch dims 0-3 before d (odd or even, d = 1 too), the default or another
# eps, magnitudes from where eps shows (0.01) to large (1000), and means up to 8 standard
# deviations from 0, where float32 cancels digits in x - mean and more in E[x^2] - E[x]^2 (a
# formulation learners write, correct, but its error grows with the square of mean/spread): the
# conditioned tolerance follows the first; the second passes with a margin of 2 at 8 sigma.
NORM_INPUTS = st.fixed_dictionaries({
    "shape": st.tuples(st.lists(st.integers(1, 3), max_size=3), st.integers(1, 33)).map(
        lambda dims: (*dims[0], dims[1])),
    "eps": st.sampled_from([None, 1e-6, 1e-3, 0.5]),
    "scale": st.sampled_from([1.0, 0.01, 1000.0]),
    "mean": st.sampled_from([0.0, 1.5, -8.0]),            # in units of the scale
    "seed": st.integers(0, 999),
})


def norm_case(shape, eps=None, scale=1.0, mean=0.0, seed=0):
    return dict(shape=shape, eps=eps, scale=scale, mean=mean, seed=seed)


LAYERNORM_CASES = [
    norm_case((4, 8)),
    norm_case((2, 3, 16), scale=2.0, mean=1.5, seed=1),
    norm_case((1, 1, 4), mean=-1.0, seed=2),       # d = 4: unbiased variance is 4/3 of the biased one
    norm_case((3, 5, 64), scale=0.01, seed=3),     # variance 1e-4: the default eps = 1e-5 shows
    norm_case((2, 6, 12), eps=0.5, scale=0.5, seed=4),   # a large eps, inside the square root
]


def norm_input(shape, scale: float, mean: float, seed: int) -> torch.Tensor:
    """Rows of exactly this spread (scale) and mean (in units of the scale), before rounding to
    float32. A random row of a few entries can have almost no spread, and normalising it is as
    ill-conditioned as its mean is large against that spread: E[x^2] - E[x]^2 would then fail on
    rounding alone. A row of d = 1 is its mean."""
    z = randn(*shape, seed=seed, dtype=torch.float64)
    if shape[-1] > 1:
        z = (z - z.mean(-1, keepdim=True)) / z.std(-1, unbiased=False, keepdim=True)
    else:
        z = torch.zeros_like(z)
    return ((z + mean) * scale).to(torch.float32)


def norm_pair(submission, name: str, case: dict, **kwargs):
    """The reference norm `name` and the learner's, with the same random weights, and the input."""
    d = case["shape"][-1]
    kw = dict(kwargs, **({} if case["eps"] is None else {"eps": case["eps"]}))
    reference, learner = pair(submission, getattr(ref, name)(d, **kw),
                              construct(getattr(submission.norms, name), d, **kw), seed=case["seed"])
    x = norm_input(case["shape"], case["scale"], case["mean"], seed=100 + case["seed"])
    module = f"{name}({', '.join([str(d)] + [f'{k}={v}' for k, v in kw.items()])})"
    return reference.double(), learner, x, msg("{module} on x of shape {shape}", module=module,
                                               shape=case["shape"])


def layernorm_agrees(submission, case: dict, **kwargs):
    reference, learner, x, what = norm_pair(submission, "LayerNorm", case, **kwargs)
    d = x.shape[-1]
    expect_close(
        learner(x), reference(x.double()), what, dtype=torch.float32,
        reduction=d,
        tol=lambda: conditioned_tolerance(reference, [x], torch.float32, reduction=d),
        hint=msg("y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim, with the "
                 "biased variance mean((x - mean)^2) and eps (default 1e-5) inside the sqrt."))


@check(points=3, rule="normalization", day=NORM_DAY, title="LayerNorm matches the reference")
def test_layernorm_matches_reference(submission):
    explore(NORM_INPUTS, lambda case: layernorm_agrees(submission, case), corners=LAYERNORM_CASES,
            examples=20, what="LayerNorm")


@check(points=1, rule="normalization", day=NORM_DAY, title="LayerNorm(bias=False) has no bias",
       needs=("layernorm-matches-reference",))
def test_layernorm_without_bias(submission):
    d = 12
    learner = construct(submission.norms.LayerNorm, d, bias=False)
    names = sorted(str(p.get("name")) for p in submission.parameters(learner) if isinstance(p, dict))
    # the reported ledger words the message; whether a bias exists is established by writing one
    try:
        submission.load(learner, {"weight": torch.ones(d), "bias": torch.ones(d)})
        submission.flush()
        has_bias = True
    except AssertionError:                  # "no parameter named bias": as it should be
        has_bias = False
    if has_bias or names != ["weight"]:
        fail(msg("LayerNorm({d}, bias=False) has the parameters {names}; expected only "
                 "['weight']. With bias=False set self.bias = None instead of creating an "
                 "nn.Parameter.", d=d, names=str(names)),
             got=names)
    explore(NORM_INPUTS, lambda case: layernorm_agrees(submission, case, bias=False),
            corners=[norm_case((3, 4, d), mean=1.0, seed=7)], examples=8, what="LayerNorm(bias=False)")


RMSNORM_CASES = [norm_case((4, 8), mean=1.5), norm_case((2, 3, 16), scale=2.0, mean=-1.0, seed=1),
                 norm_case((1, 1, 4), mean=1.0, seed=2),
                 norm_case((2, 5, 32), eps=0.5, scale=0.3, mean=0.7, seed=3)]


def rmsnorm_agrees(submission, case: dict):
    reference, learner, x, what = norm_pair(submission, "RMSNorm", case)
    d = x.shape[-1]
    expect_close(
        learner(x), reference(x.double()), what, dtype=torch.float32,
        reduction=d,
        tol=lambda: conditioned_tolerance(reference, [x], torch.float32, reduction=d),
        hint=msg("y = x / sqrt(mean(x^2) + eps) * weight over the last dim: no mean "
                 "subtraction, no bias."))


@check(points=2, rule="normalization", day=NORM_DAY, title="RMSNorm matches the reference")
def test_rmsnorm_matches_reference(submission):
    explore(NORM_INPUTS, lambda case: rmsnorm_agrees(submission, case),
            corners=RMSNORM_CASES, examples=15, what="RMSNorm")     # corners: nonzero means on purpose


# -- positions (day 48) ------------------------------------------------------------------------------

SINUSOIDAL_INPUTS = st.fixed_dictionaries({"T": st.integers(1, 80),     # T = 1, odd and even T
                                           "d": st.integers(1, 48).map(lambda half: 2 * half)})


def sinusoidal_agrees(submission, case: dict):
    T, d = case["T"], case["d"]
    # sin's argument p / 10000^(2i/d) reaches T radians, so its rounding error grows like
    # eps * T: the tolerance rule's sqrt(reduction) with reduction = T^2.
    expect_close(
        submission.positions.sinusoidal_positions(T, d), ref.sinusoidal_positions(T, d).double(),
        f"sinusoidal_positions(T={T}, d={d})", dtype=torch.float32,
        reduction=T * T,
        hint=msg("PE[p, 2i] = sin(p / 10000^(2i/d)) and PE[p, 2i+1] = cos(p / 10000^(2i/d)); "
                 "pair i shares one frequency."))


@check(points=2, rule="positional-encoding", day=POSITIONS_DAY, title="sinusoidal positions")
def test_sinusoidal_positions(submission):
    corners = [{"T": T, "d": d} for T, d in [(1, 2), (16, 32), (7, 6), (50, 64), (3, 128)]]
    explore(SINUSOIDAL_INPUTS, lambda case: sinusoidal_agrees(submission, case), corners=corners,
            examples=10, what="sinusoidal_positions")


def sinusoidal_rejects(submission, case: dict):
    T, d = case["T"], case["d"]
    exc = expect_raises(lambda: submission.positions.sinusoidal_positions(T, d), "ValueError",
                        f"sinusoidal_positions(T={T}, d={d})",
                        hint=msg("Each (sin, cos) pair takes two features, so d must be even."))
    if not re.search(rf"\bd\b|\b{d}\b|dim", exc.learner_message, re.IGNORECASE):
        fail(msg("the ValueError should say which argument is wrong (d, and its value), got: "
                 "{message}", message=repr(exc.learner_message)))


def rope_rejects(submission, shape):
    expect_raises(lambda: submission.positions.apply_rope(randn(*shape, seed=shape[-1])), "ValueError",
                  msg("apply_rope(x of shape {shape})", shape=shape),
                  hint=msg("RoPE rotates pairs (x[..., 2i], x[..., 2i+1]), so the last dim d of x "
                           "must be even: check it and raise ValueError naming d."))


@check(points=1, rule="api-contract", day=POSITIONS_DAY, title="sinusoidal positions and RoPE need an even d")
def test_sinusoidal_rejects_odd_d(submission):
    odd = st.fixed_dictionaries({"T": st.integers(1, 9), "d": st.integers(0, 15).map(lambda h: 2 * h + 1)})
    explore(odd, lambda case: sinusoidal_rejects(submission, case), corners=[{"T": 4, "d": 5}],
            examples=4, what="sinusoidal_positions")
    for shape in ((4, 5), (2, 3, 6, 1), (1, 2, 7)):
        rope_rejects(submission, shape)


ROPE_CASES = [  # x of that shape, positions (None: the default), theta (None: the default)
    dict(shape=(5, 8), positions=None, theta=None, seed=0),
    dict(shape=(2, 3, 7, 16), positions=None, theta=None, seed=1),    # (B, h, T, d_k), as in attention
    dict(shape=(2, 6, 32), positions=[3, 7, 0, 12, 100, 63], theta=None, seed=2),   # any order
    dict(shape=(1, 2, 4, 10), positions=[5, 6, 7, 8], theta=None, seed=3),          # a shifted window
    dict(shape=(4, 12), positions=None, theta=500.0, seed=4),                       # another theta
]


@st.composite
def rope_inputs(draw):
    """x (..., T, d) with 0-3 batch dims, T = 1 or more, d even; default or given positions and theta."""
    dims = draw(st.lists(st.integers(1, 3), max_size=3))
    T, d = draw(st.integers(1, 9)), 2 * draw(st.integers(1, 12))
    positions = draw(st.none() | st.lists(st.integers(0, 200), min_size=T, max_size=T))
    return dict(shape=(*dims, T, d), positions=positions,
                theta=draw(st.sampled_from([None, 500.0, 1e6])), seed=draw(st.integers(0, 999)))


def rope_agrees(submission, case: dict):
    shape, positions, theta = case["shape"], case["positions"], case["theta"]
    x = randn(*shape, seed=40 + case["seed"])
    T = shape[-2]
    pos = None if positions is None else torch.tensor(positions)
    kw = {} if pos is None else {"positions": pos}
    if theta is not None:
        kw["theta"] = theta
    got = submission.positions.apply_rope(x, **kw)
    p = torch.arange(T) if pos is None else pos
    largest = int(p.abs().max()) + 1
    what = msg("apply_rope(x of shape {shape}{arguments})", shape=shape,
               arguments=(f", positions={positions}" if positions is not None else "")
               + (f", theta={theta}" if theta is not None else ""))
    expect_close(
        got, ref.apply_rope(x.double(), pos, **({"theta": theta} if theta else {})), what, dtype=torch.float32,
        reduction=largest * largest,
        hint=msg("Pair i = (x[..., 2i], x[..., 2i+1]) rotates by a = p * theta^(-2i/d): "
                 "(x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a), with p from "
                 "`positions` (default arange(T))."))


@check(points=3, rule="positional-encoding", day=POSITIONS_DAY, title="RoPE rotates each pair")
def test_apply_rope(submission):
    explore(rope_inputs(), lambda case: rope_agrees(submission, case), corners=ROPE_CASES,
            examples=12, what="apply_rope")


# -- attention, as the blocks use it (days 44-45) -----------------------------------------------------

@st.composite
def unequal_attention_inputs(draw):
    """q (..., T_q, d_k) and k, v (..., T_k, d_k) with T_q and T_k drawn apart (T_q < T_k, as when
    a few new queries attend to a cache, and T_q > T_k), 0-2 batch dims, with or without a
    padding mask over the keys."""
    return dict(dims=tuple(draw(st.lists(st.integers(1, 3), max_size=2))),
                T_q=draw(st.integers(1, 7)), T_k=draw(st.integers(1, 7)), d_k=draw(st.integers(1, 8)),
                padding=draw(st.booleans()), seed=draw(st.integers(0, 999)))


def causal_unequal_agrees(submission, case: dict):
    dims, T_q, T_k, d_k, seed = (case[k] for k in ("dims", "T_q", "T_k", "d_k", "seed"))
    q = randn(*dims, T_q, d_k, seed=seed)
    k, v = randn(*dims, T_k, d_k, seed=seed + 1), randn(*dims, T_k, d_k, seed=seed + 2)
    mask = None
    if case["padding"]:                      # the last key is padding for every query
        mask = torch.zeros(*dims, 1, T_k, dtype=torch.bool)
        mask[..., -1] = True
    what = msg("causal attention with T_q={T_q} and T_k={T_k}", T_q=T_q, T_k=T_k)
    got = submission.attention.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    expected = ref.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask=mask,
                                                causal=True)
    expect_close(
        got, expected, what, dtype=torch.float32,
        reduction=T_k,
        nan_symptom="nan-forward",
        hint=msg("With causal=True, query i may attend to keys 0..i only, whatever T_k is: block "
                 "key j > i in a (T_q, T_k) mask, torch.triu(torch.ones(T_q, T_k), diagonal=1) "
                 "(a (T_q, T_q) mask or one aligned bottom-right lets a query see later keys), "
                 "combined with the mask: blocked if either blocks."))


@check(points=2, rule="causal-mask", day=44, title="causal attention with T_q != T_k")
def test_causal_attention_with_unequal_lengths(submission):
    corners = [dict(dims=(2,), T_q=1, T_k=5, d_k=4, padding=False, seed=0),
               dict(dims=(2,), T_q=3, T_k=6, d_k=4, padding=True, seed=1),
               dict(dims=(2,), T_q=6, T_k=3, d_k=4, padding=False, seed=2)]
    explore(unequal_attention_inputs(), lambda case: causal_unequal_agrees(submission, case),
            corners=corners, examples=12, what="scaled_dot_product_attention")


@st.composite
def half_attention_inputs(draw):
    """q, k, v (..., T, d_k) in float16 or bfloat16 with 0-2 batch dims, causal, and a padding
    mask that may block key 0 of the first sequence: its query 0 then has no key left."""
    return dict(dtype=draw(st.sampled_from(["float16", "bfloat16"])),
                dims=tuple(draw(st.lists(st.integers(1, 3), max_size=2))),
                T=draw(st.integers(1, 8)), d_k=draw(st.integers(1, 16)),
                fully_blocked=draw(st.booleans()), scale=draw(st.sampled_from([1.0, 4.0])),
                seed=draw(st.integers(0, 999)))


def half_attention_agrees(submission, case: dict):
    dtype, dims, T = getattr(torch, case["dtype"]), case["dims"], case["T"]
    q, k, v = (randn(*dims, T, case["d_k"], seed=case["seed"] + i, scale=case["scale"], dtype=dtype)
               for i in range(3))
    mask = torch.zeros(*dims, 1, T, dtype=torch.bool)              # (..., 1, T_k): padding
    if case["fully_blocked"]:
        mask.view(-1, T)[0, 0] = True               # first sequence: key 0 is padding
    try:
        got = submission.attention.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    except LearnerError as exc:
        if exc.is_a("NotImplementedError"):
            raise
        fail(msg("attention in {dtype} raised {type}: {message}. A constant like -1e9 does not "
                 "fit in float16 (its largest value is 65504); fill blocked scores with "
                 "float('-inf') or torch.finfo(scores.dtype).min.", dtype=case["dtype"],
                 type=exc.type_name, message=exc.learner_message),
             symptoms=["fp16-overflow"])

    def reference(q, k, v):
        return ref.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)

    what = msg("causal attention in {dtype}", dtype=case["dtype"])
    got = expect_dtype(expect_shape(got, q.shape, what), dtype, what)
    bad = ~torch.isfinite(got.double())
    if case["fully_blocked"] and bad.any() and not bad.view(-1, T, case["d_k"])[1:].any() \
            and not bad.view(-1, T, case["d_k"])[0, 1:].any():
        fail(msg("{what} is NaN for a query whose keys are all blocked (the mask blocks key 0, "
                 "causal=True the rest): softmax of an all -inf row is 0/0. That query's output "
                 "must be zeros: give such rows a zero max (or a zero sum guard) before dividing.",
                 what=what),
             symptoms=["nan-forward"])
    expect_close(got, reference(q.double(), k.double(), v.double()), what, dtype=dtype,
                 reduction=T, nan_symptom="fp16-overflow",
                 tol=lambda: conditioned_tolerance(reference, [q, k, v], dtype, reduction=T),
                 hint=msg("In half precision every masking constant must fit the dtype."))


@check(points=2, rule="numerical-stability", day=45, title="attention in float16 and bfloat16",
       needs=("causal-attention-with-unequal-lengths",))
def test_attention_in_half_precision(submission):
    corners = [dict(dtype=dtype, dims=(2, 2), T=6, d_k=8, fully_blocked=True, scale=2.0, seed=31)
               for dtype in ("float16", "bfloat16")]
    explore(half_attention_inputs(), lambda case: half_attention_agrees(submission, case),
            corners=corners, examples=10, what="scaled_dot_product_attention")


def mha_pair(submission, d_model, n_head, bias, seed):
    return pair(submission, ref.MultiHeadAttention(d_model, n_head, bias=bias),
                construct(submission.attention.MultiHeadAttention, d_model, n_head, bias=bias), seed)


MHA_CASES = [dict(B=2, T=5, d_model=8, n_head=2, bias=True, seed=0),
             dict(B=1, T=1, d_model=8, n_head=1, bias=False, seed=1),
             dict(B=3, T=7, d_model=16, n_head=4, bias=False, seed=2),
             dict(B=2, T=6, d_model=12, n_head=3, bias=True, seed=3)]


@st.composite
def mha_inputs(draw):
    """x (B, T, d_model) with T = 1 or more, 1-4 heads of d_k = 1-5 features, with or without bias."""
    n_head, d_k = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    return dict(B=draw(st.integers(1, 3)), T=draw(st.integers(1, 8)), d_model=n_head * d_k,
                n_head=n_head, bias=draw(st.booleans()), seed=draw(st.integers(0, 999)))


def mha_agrees(submission, case: dict):
    B, T, d_model, h, bias, seed = (case[k] for k in ("B", "T", "d_model", "n_head", "bias", "seed"))
    reference, learner = mha_pair(submission, d_model, h, bias, seed=50 + seed)
    x = randn(B, T, d_model, seed=seed)
    expect_close(learner(x, causal=False), reference.double()(x.double(), causal=False),
                 msg("{module} with causal=False",
                     module=f"MultiHeadAttention(d_model={d_model}, n_head={h}, bias={bias})"),
                 dtype=torch.float32, reduction=d_model, nan_symptom="nan-forward",
                 hint=msg("Project with w_q, w_k, w_v, split into heads with view(B, T, h, d_k)"
                          ".transpose(1, 2), attend per head, merge, project with w_o."))


@check(points=2, rule="head-split", day=45, title="multi-head attention (no mask) matches day 45")
def test_mha_matches_reference(submission):
    explore(mha_inputs(), lambda case: mha_agrees(submission, case), corners=MHA_CASES,
            examples=12, what="MultiHeadAttention")


def mha_causal_agrees(submission, case: dict):
    B, T, d_model, h, bias, seed = (case[k] for k in ("B", "T", "d_model", "n_head", "bias", "seed"))
    reference, learner = mha_pair(submission, d_model, h, bias, seed=60 + seed)
    x = randn(B, T, d_model, seed=70 + seed)
    what = msg("{module} with the default causal=True",
               module=f"MultiHeadAttention(d_model={d_model}, n_head={h})")
    got = expect_shape(learner(x), (B, T, d_model), what)     # causal=True is the default
    reference.double()
    if T > 1 and torch.isnan(got[:, 0]).all() and torch.isfinite(got[:, 1:]).all():
        fail(msg("{what} is NaN at position 0: a mask built with torch.triu(..., diagonal=0) "
                 "also blocks each token's own position, so query 0 has no key left and "
                 "softmax of an all -inf row is NaN. Use diagonal=1: block key j > i only.",
                 what=what),
             symptoms=["nan-forward"])
    tol = tolerance(torch.float32, d_model)
    if T > 1 and is_close(got, reference(x.double(), causal=False), tol):
        fail(msg("{what} lets every token attend to the tokens after it: causal=True has no "
                 "effect, so the future leaks into the past. Block key j > query i with "
                 "torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).", what=what),
             symptoms=["future-leak"])
    expect_close(
        got, reference(x.double()), what, dtype=torch.float32,
        reduction=d_model,
        nan_symptom="nan-forward",
        hint=msg("With causal=True, block key j > query i (torch.triu(ones(T, T), diagonal=1)) "
                 "and nothing else."))


@check(points=2, rule="causal-mask", day=44, title="causal multi-head attention matches day 45",
       needs=("mha-matches-reference", "causal-attention-with-unequal-lengths"))
def test_mha_causal_matches_reference(submission):
    explore(mha_inputs(), lambda case: mha_causal_agrees(submission, case), corners=MHA_CASES,
            examples=12, what="MultiHeadAttention")


def softmax_default_dim(submission):
    z = randn(2, 3, 5, seed=190, scale=3.0)
    expect_close(submission.attention.stable_softmax(z), torch.softmax(z.double(), dim=-1),
                 "stable_softmax(z) on z of shape (2, 3, 5)", dtype=torch.float32, reduction=5,
                 hint=msg("stable_softmax(z, dim=-1): without a dim it normalises the last one."))


def uncausal_unequal_agrees(submission, T_q: int, T_k: int, padding: bool, seed: int):
    """Attention without the causal mask when the queries and the keys differ in number."""
    q = randn(2, T_q, 4, seed=seed)
    k, v = randn(2, T_k, 4, seed=seed + 1), randn(2, T_k, 4, seed=seed + 2)
    mask = None
    if padding:                               # the first key is padding for every query
        mask = torch.zeros(2, 1, T_k, dtype=torch.bool)
        mask[..., 0] = True
    expect_close(submission.attention.scaled_dot_product_attention(q, k, v, mask=mask),
                 ref.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask=mask),
                 msg("attention with T_q={T_q} and T_k={T_k}, causal=False", T_q=T_q, T_k=T_k),
                 dtype=torch.float32, reduction=T_k, nan_symptom="nan-forward",
                 hint=msg("The scores q k^T / sqrt(d_k) are (..., T_q, T_k): any mask you build "
                          "over them is (T_q, T_k) too, whether or not causal=True."))


def rejects_heads(submission, d_model: int, n_head: int):
    hint = msg("Each head takes d_model / n_head features: raise ValueError('n_head ... d_model "
               "...') unless n_head divides d_model.")
    expect_raises(lambda: construct(submission.attention.MultiHeadAttention, d_model, n_head),
                  "ValueError", f"MultiHeadAttention(d_model={d_model}, n_head={n_head})", hint=hint)
    expect_raises(lambda: submission.attention.split_heads(randn(2, 3, d_model, seed=d_model), n_head),
                  "ValueError", msg("split_heads(x of shape {shape}, n_head={n_head})",
                                    shape=(2, 3, d_model), n_head=n_head), hint=hint)


@check(points=1, rule="api-contract", day=45, title="attention keeps day 45's API")
def test_attention_api(submission):
    # what the blocks never exercise: softmax's default dim, T_q != T_k without the causal mask,
    # and the heads' argument check
    softmax_default_dim(submission)
    for T_q, T_k, padding, seed in ((3, 5, False, 191), (4, 2, True, 194), (1, 6, True, 197)):
        uncausal_unequal_agrees(submission, T_q, T_k, padding, seed)
    for d_model, n_head in ((8, 3), (12, 5), (6, 4)):
        rejects_heads(submission, d_model, n_head)


# -- the MLP and the Pre-LN block (days 46-47) -----------------------------------------------------

MLP_CASES = [  # config fields, input shape; inputs of a few units (scale 3)
    dict(fields=dict(d_model=16, bias=False), shape=(2, 5, 16), seed=0),
    dict(fields=dict(d_model=8, d_ff=48, bias=True), shape=(3, 4, 8), seed=1),
    dict(fields=dict(d_model=12, d_ff=20, bias=False), shape=(1, 7, 12), seed=2),
]


def block_config(**fields):
    base = dict(vocab_size=11, block_size=8, n_layer=1, n_head=1)
    return {**base, **fields}


@st.composite
def block_fields(draw, heads=True):
    """d_model = n_head * d_k (odd or even), d_ff None (4 * d_model) or given, with or without bias."""
    n_head = draw(st.integers(1, 3)) if heads else 1
    d_model = n_head * draw(st.integers(1, 6))
    fields = dict(d_model=d_model, n_head=n_head, d_ff=draw(st.none() | st.integers(1, 24)),
                  bias=draw(st.booleans()))
    return {k: v for k, v in fields.items() if v is not None}


@st.composite
def mlp_inputs(draw, heads=False):
    fields = draw(block_fields(heads=heads))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 6)), fields["d_model"])   # T = 1 too
    return dict(fields=fields, shape=shape, seed=draw(st.integers(0, 999)))


def mlp_agrees(submission, case: dict):
    cfg = block_config(**case["fields"])
    reference, learner = pair(submission, ref.MLP(ref.GPTConfig(**cfg)),
                              construct(submission.gpt.MLP, submission.gpt.GPTConfig(**cfg)),
                              seed=80 + case["seed"])
    # inputs of a few units put fc's outputs where tanh-GELU and exact GELU differ most (|z| ~ 2.5)
    x = randn(*case["shape"], seed=90 + case["seed"], scale=3.0)
    d_ff = cfg.get("d_ff") or 4 * cfg["d_model"]
    reference.double()
    expect_close(
        learner(x), reference(x.double()), f"MLP({describe_config(cfg)})", dtype=torch.float32,
        reduction=max(d_ff, cfg["d_model"]),
        hint=msg("MLP(x) = proj(GELU(fc(x))) with fc: d_model -> d_ff (d_ff None means "
                 "4 * d_model), exact GELU, proj: d_ff -> d_model, bias=config.bias."))


@check(points=2, rule="api-contract", day=FFN_DAY, title="the MLP: fc, exact GELU, proj")
def test_mlp_matches_reference(submission):
    explore(mlp_inputs(), lambda case: mlp_agrees(submission, case), corners=MLP_CASES,
            examples=10, what="MLP")


BLOCK_CASES = [  # config fields, input shape
    dict(fields=dict(d_model=16, n_head=2), shape=(2, 5, 16), seed=0),
    dict(fields=dict(d_model=12, n_head=3, d_ff=20, bias=True), shape=(3, 6, 12), seed=1),
    dict(fields=dict(d_model=8, n_head=1), shape=(1, 1, 8), seed=2),
    dict(fields=dict(d_model=16, n_head=4, bias=True), shape=(2, 7, 16), seed=3),
]


def block_is_pre_ln(submission, case: dict):
    # The block's own wiring is graded here, with the learner's own parts: a bug inside LayerNorm,
    # attention or the MLP fails those checks, not this one.
    fields, shape, seed = case["fields"], case["shape"], case["seed"]
    cfg = block_config(**fields)
    _, learner = pair(submission, ref.Block(ref.GPTConfig(**cfg)),
                      construct(submission.gpt.Block, submission.gpt.GPTConfig(**cfg)), seed=100 + seed)
    x = randn(*shape, seed=110 + seed, scale=2.0, shift=0.5)
    what = f"Block({describe_config(cfg)})"
    got = expect_dtype(expect_shape(learner(x), shape, what), x.dtype, what)

    def sub(name, h, **kw):
        return expect_shape(getattr(learner, name)(h, **kw), shape, f"{what}.{name}")

    h = x + sub("attn", sub("ln_1", x), causal=True)
    pre_ln = h + sub("mlp", sub("ln_2", h))
    reduction = 4 * cfg["d_model"]
    tol = tolerance(torch.float32, reduction)
    if same(got, pre_ln, tol):
        return
    expect_close(got, pre_ln, msg("{what} (compared with your own ln_1, attn, ln_2, mlp wired "
                                  "as Pre-LN)", what=what), dtype=torch.float32, reduction=reduction,
                 hint=msg("A Pre-LN block is exactly {pre_ln}, with attn(..., causal=True). "
                          "Normalise the input of each sublayer, and add the sublayer's output "
                          "to the un-normalised x.", pre_ln=PRE_LN))


@check(points=3, rule="pre-ln-residual", day=NORM_DAY,
       title="the block is Pre-LN with clean residuals",
       needs=("layernorm-matches-reference", "mha-causal-matches-reference", "mlp-matches-reference"))
def test_block_is_pre_ln(submission):
    explore(mlp_inputs(heads=True), lambda case: block_is_pre_ln(submission, case),
            corners=BLOCK_CASES, examples=6, what="Block")


# -- the whole GPT (day 48) -------------------------------------------------------------------------

GPT_CASES = [  # config fields, idx of shape (B, T)
    dict(cfg=dict(vocab_size=50, block_size=8, d_model=16, n_layer=1, n_head=1), B=2, T=5, seed=0),  # odd T
    dict(cfg=dict(vocab_size=37, block_size=12, d_model=24, n_layer=2, n_head=3, d_ff=40, bias=True,
                  tie_weights=False), B=3, T=12, seed=1),                     # T = block_size
    dict(cfg=dict(vocab_size=64, block_size=16, d_model=32, n_layer=2, n_head=4), B=1, T=1, seed=2),  # T = 1
    dict(cfg=dict(vocab_size=29, block_size=10, d_model=16, n_layer=2, n_head=2, bias=True), B=2, T=7,
         seed=3),
    dict(cfg=dict(vocab_size=40, block_size=9, d_model=8, n_layer=1, n_head=2, d_ff=20,
                  tie_weights=False), B=2, T=9, seed=4),
]


@st.composite
def gpt_configs(draw):
    """A GPTConfig from the whole contract: small sizes, d_ff None or given, bias, tied or not."""
    fields = draw(block_fields())
    cfg = dict(vocab_size=draw(st.integers(2, 40)), block_size=draw(st.integers(1, 10)),
               d_model=fields.pop("d_model"), n_layer=draw(st.integers(1, 2)), **fields)
    if not draw(st.booleans()):
        cfg["tie_weights"] = False
    return cfg


@st.composite
def gpt_inputs(draw, too_long=False):
    """A config and idx (B, T) with T = 1 ... block_size (both ends drawn often), or with
    too_long, block_size < T <= 2 * block_size + 2."""
    cfg = draw(gpt_configs())
    n = cfg["block_size"]
    T = (draw(st.integers(n + 1, 2 * n + 2)) if too_long
         else draw(st.sampled_from([n, 1]) | st.integers(1, n)))
    return dict(cfg=cfg, B=draw(st.integers(1, 3)), T=T, seed=draw(st.integers(0, 999)))


def gpt_agrees(submission, case: dict):
    cfg, B, T, seed = case["cfg"], case["B"], case["T"], case["seed"]
    reference, learner = gpt_pair(submission, cfg, seed=120 + seed)
    idx = tokens(B, T, cfg["vocab_size"], seed=130 + seed)
    what = msg("{module} logits for idx of shape {shape}", module=f"GPT({describe_config(cfg)})",
               shape=(B, T))
    logits, _ = gpt_forward(learner, idx)
    reference.double()
    expect_close(
        logits, reference(idx)[0], what, dtype=torch.float32,
        reduction=gpt_reduction(cfg),
        nan_symptom="nan-forward",
        hint=msg("x = wte(idx) + wpe(arange(T)); each block in order; logits = "
                 "lm_head(ln_f(x)). If an earlier check of LayerNorm, attention, the MLP or the "
                 "block fails, fix that first."))


GPT_PARTS = ("layernorm-matches-reference", "mha-causal-matches-reference", "mlp-matches-reference",
             "block-is-pre-ln")


@check(points=3, rule="api-contract", day=GPT_DAY, title="GPT logits match the reference",
       needs=GPT_PARTS)
def test_gpt_matches_reference(submission):
    explore(gpt_inputs(), lambda case: gpt_agrees(submission, case), corners=GPT_CASES,
            examples=8, what="GPT")


@check(points=2, rule="positional-encoding", day=POSITIONS_DAY,
       title="GPT output depends on position", needs=GPT_PARTS)
def test_gpt_uses_positions(submission):
    cfg = dict(vocab_size=20, block_size=8, d_model=16, n_layer=2, n_head=2)
    reference, learner = gpt_pair(submission, cfg, seed=140)
    T = cfg["block_size"]
    repeated = torch.full((1, T), 7)                   # one token, repeated
    logits, _ = gpt_forward(learner, repeated)
    logits = expect_shape(logits, (1, T, cfg["vocab_size"]), "GPT logits")
    tol = tolerance(torch.float32, gpt_reduction(cfg))
    if all(is_close(logits[:, t], logits[:, 0], tol) for t in range(1, T)):
        fail(msg("for a sequence of one token repeated, your GPT gives the same logits at every "
                 "position. Without position information attention cannot tell the copies apart "
                 "(it is permutation-equivariant), so the model cannot know where it is. Add the "
                 "learned position embedding: x = wte(idx) + wpe(arange(T))."),
             symptoms=["value-mismatch"])
    # a different wpe table must change the output: wpe has to be the position embedding used
    other = {k: v.clone() for k, v in reference.state_dict().items()}
    other["wpe.weight"] = randn(T, cfg["d_model"], seed=141)
    submission.load(learner, other)
    idx = tokens(2, T, cfg["vocab_size"], seed=142)
    shape = (2, T, cfg["vocab_size"])
    changed = expect_shape(gpt_forward(learner, idx)[0], shape, "GPT logits")
    submission.load(learner, reference.state_dict())
    base = expect_shape(gpt_forward(learner, idx)[0], shape, "GPT logits")
    if is_close(changed, base, tol):
        fail(msg("loading a different table into GPT.wpe did not change your GPT's logits: wpe "
                 "is not used. The exercise's GPT uses learned positions: x = wte(idx) + wpe(arange(T))."),
             symptoms=["value-mismatch"])


def gpt_loss_agrees(submission, case: dict):
    cfg, B, T, seed = case["cfg"], case["B"], case["T"], case["seed"]
    _, learner = gpt_pair(submission, cfg, seed=150 + seed)
    V = cfg["vocab_size"]
    idx, targets = tokens(B, T, V, seed=151 + seed), tokens(B, T, V, seed=152 + seed)
    logits, loss = gpt_forward(learner, idx, targets)
    logits = expect_shape(logits, (B, T, V), "GPT logits")
    if loss is None:
        fail(msg("GPT(idx, targets) returned loss None; with targets it must return the mean "
                 "cross-entropy F.cross_entropy(logits.view(B*T, V), targets.view(B*T))."))
    expected = F.cross_entropy(logits.double().reshape(B * T, V), targets.reshape(B * T))
    if not torch.isfinite(expected) and not torch.isfinite(as_tensor(loss, msg("the loss"))).all():
        return          # NaN logits give a NaN loss; the logits are graded by other checks
    expect_close(loss, expected, msg("the loss GPT(idx, targets) returned"), dtype=torch.float32,
                 reduction=B * T * V,
                 hint=msg("loss = F.cross_entropy(logits.view(B*T, V), targets.view(B*T)): flatten "
                          "batch and time so each position is one example, averaged over all B*T."))
    _, none = gpt_forward(learner, idx)
    if none is not None:
        fail(msg("GPT(idx) without targets returned a loss ({type}); without targets the loss is None.",
                 type=type_name(none)))


@check(points=2, rule="api-contract", day=GPT_DAY, title="the loss is the cross-entropy of the logits",
       needs=("gpt-matches-reference",))
def test_gpt_loss_is_cross_entropy(submission):
    corner = dict(cfg=dict(vocab_size=23, block_size=8, d_model=16, n_layer=1, n_head=2), B=3, T=6,
                  seed=0)
    explore(gpt_inputs(), lambda case: gpt_loss_agrees(submission, case), corners=[corner],
            examples=6, what="GPT")


def gpt_rejects(submission, case: dict):
    cfg, T = case["cfg"], case["T"]
    learner = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**cfg))
    idx = tokens(case["B"], T, cfg["vocab_size"], seed=160 + case["seed"])
    n = cfg["block_size"]
    expect_raises(lambda: learner(idx), "ValueError",
                  msg("GPT with block_size={n} on idx of length T={T}", n=n, T=T),
                  hint=msg("wpe has only block_size rows: check T <= block_size and raise "
                           "ValueError('... T ... block_size ...') before the embedding lookup."))


@check(points=1, rule="api-contract", day=GPT_DAY, title="T > block_size is an error")
def test_gpt_rejects_too_long_input(submission):
    corner = dict(cfg=dict(vocab_size=10, block_size=6, d_model=8, n_layer=1, n_head=2), B=1, T=7,
                  seed=0)
    explore(gpt_inputs(too_long=True), lambda case: gpt_rejects(submission, case),
            corners=[corner], examples=4, what="GPT")


def leak_source(submission) -> str | None:
    """Why a GPT leaks, when it is the known bug: attention ignoring causal=True, or a block not
    asking for it. None when the attention is broken some other way (a head split that mixes
    positions leaks too, and is not a mask bug)."""
    d_model, h, T = 8, 2, 5
    reference, learner = mha_pair(submission, d_model, h, False, seed=175)
    x = randn(2, T, d_model, seed=176)
    try:
        got = as_tensor(learner(x, causal=True), "MultiHeadAttention")
    except (LearnerError, CheckFailure):
        return None
    tol = tolerance(torch.float32, d_model)
    reference.double()
    if is_close(got, reference(x.double(), causal=False), tol):
        return msg("your MultiHeadAttention ignores causal=True")
    if is_close(got, reference(x.double(), causal=True), tol):
        return msg("your attention is causal, but a block calls it without causal=True")
    return None


@check(points=2, rule="causal-mask", day=44, title="the GPT never sees the future",
       needs=("mha-causal-matches-reference", "block-is-pre-ln"))
def test_gpt_has_no_future_leak(submission):
    cfg = dict(vocab_size=30, block_size=10, d_model=16, n_layer=2, n_head=2, bias=True)
    _, learner = gpt_pair(submission, cfg, seed=170)
    B, T, V = 2, 10, cfg["vocab_size"]
    idx = tokens(B, T, V, seed=171)
    base, _ = gpt_forward(learner, idx)
    base = expect_shape(base, (B, T, V), "GPT logits")
    tol = tolerance(torch.float32, gpt_reduction(cfg))
    for t in (0, 3, 6, 8):
        changed_idx = idx.clone()
        changed_idx[:, t + 1:] = (idx[:, t + 1:] + 1 + tokens(B, T - t - 1, V - 1, seed=172 + t)) % V
        changed = expect_shape(gpt_forward(learner, changed_idx)[0], (B, T, V), "GPT logits")
        if not torch.allclose(changed[:, :t + 1].double(), base[:, :t + 1].double(),
                              rtol=tol, atol=tol, equal_nan=True):
            source = leak_source(submission)
            message = msg("changing the tokens after position {t} changed your GPT's logits at "
                          "positions <= {t}: the future leaks into the past, so training would "
                          "score the model on tokens it can see.", t=t)
            if source is None:
                fail(msg("{message} Every block must call attn(..., causal=True), the causal mask "
                         "must block key j > query i, and the head split must keep positions "
                         "apart (view(B, T, h, d_k).transpose(1, 2)); see the attention checks.",
                         message=message),
                     symptoms=["future-leak"], position=t)
            fail(msg("{message} {source}: every block must call attn(ln_1(x), causal=True), and "
                     "causal=True must block key j > query i.", message=message,
                     source=source.capitalized()),
                 symptoms=["future-leak"], position=t)


def unique_count(rows) -> tuple[int, int]:
    """(parameters counted once per Parameter object, parameters counted once per name), from the
    ledger a jail reports: used to word a message, never to pass a check."""
    by_object = {r.get("object"): math.prod(r.get("shape", [])) for r in rows if isinstance(r, dict)}
    return sum(by_object.values()), sum(math.prod(r.get("shape", [])) for r in rows if isinstance(r, dict))


def reference_count(reference) -> tuple[int, int]:
    """(unique parameters, parameters counted once per name) of a reference module, counted here."""
    return (sum(p.numel() for p in reference.parameters()),
            sum(p.numel() for _, p in reference.named_parameters(remove_duplicate=False)))


def head_follows_embedding(submission, learner, cfg: dict, seed: int) -> bool | None:
    """Whether the learner's GPT reads one matrix at both ends, established from its logits under
    weights the grader writes: after loading wte.weight alone, the head must have changed with it.
    None when lm_head.weight has no effect on the logits at all."""
    reference = randomize(ref.GPT(ref.GPTConfig(**dict(cfg, tie_weights=False))), seed)
    state = reference.state_dict()                         # wte A and lm_head B, distinct
    same_matrix = dict(state, **{"lm_head.weight": state["wte.weight"].clone()})
    other_head = {"lm_head.weight": randn(*state["lm_head.weight"].shape, seed=seed + 1)}
    idx = tokens(2, cfg["block_size"], cfg["vocab_size"], seed=seed + 2)
    shape = (2, cfg["block_size"], cfg["vocab_size"])

    def logits(*states):
        for s in states:
            submission.load(learner, s)
        return expect_shape(gpt_forward(learner, idx)[0], shape, "GPT logits")

    both_a = logits(same_matrix)                           # wte = lm_head = A, tied or not
    head_c = logits(same_matrix, other_head)               # the head (and a tied wte) becomes C
    after_wte = logits(state, {"wte.weight": state["wte.weight"]})   # tied: both A; untied: (A, B)
    tol = tolerance(torch.float32, gpt_reduction(cfg))
    if same(head_c, both_a, tol):
        return None
    return same(after_wte, both_a, tol)


@check(points=3, rule="weight-tying", day=GPT_DAY, title="tie_weights shares one matrix",
       needs=("gpt-matches-reference",))
def test_weight_tying(submission):
    tied = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**TOY, tie_weights=True))
    follows = head_follows_embedding(submission, tied, dict(TOY), seed=180)
    if follows is None:
        fail(msg("loading a different lm_head.weight did not change your GPT's logits: the head "
                 "must compute logits = lm_head(ln_f(x)) with lm_head = nn.Linear(d, V, bias=False)."),
             symptoms=["value-mismatch"])
    if not follows:
        fail(msg("with tie_weights=True, lm_head.weight and wte.weight are two different "
                 "Parameters. Tying means ONE matrix read by both ends: self.lm_head.weight = "
                 "self.wte.weight (assign the Parameter itself; copying its values is not tying). "
                 "For the toy GPT that saves V * d = 3,200 parameters ({untied:,} -> {tied:,}).",
                 untied=TOY_UNTIED, tied=TOY_TIED))
    # One Parameter, not a second one that shares its storage: converting a model (.double(),
    # .half(), .to(device)) gives each Parameter a tensor of its own, so only a real tie survives
    # the round trip to float64 and back.
    converted = tied.double().float()
    if not head_follows_embedding(submission, converted, dict(TOY), seed=182):
        fail(msg("after converting your GPT to float64 and back (model.double().float(); .half() "
                 "and .to(device) convert the same way), lm_head.weight no longer follows "
                 "wte.weight: they are two Parameters that only shared one storage, which any "
                 "conversion splits, and which an optimizer updates as two matrices. Tying means "
                 "ONE Parameter read by both ends: self.lm_head.weight = self.wte.weight."),
             symptoms=["value-mismatch"])
    untied = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**TOY, tie_weights=False))
    if head_follows_embedding(submission, untied, dict(TOY, tie_weights=False), seed=181):
        fail(msg("with tie_weights=False, lm_head.weight and wte.weight are the same Parameter; "
                 "they must be two independent matrices (tie only when config.tie_weights is "
                 "True)."))


GPT_LEDGER_CASES = [TOY, dict(TOY, tie_weights=False),
                    dict(vocab_size=37, block_size=12, d_model=24, n_layer=3, n_head=3, d_ff=40,
                         bias=True)]


@check(points=2, rule="parameter-count", day=FFN_DAY, title="the GPT's parameter ledger")
def test_gpt_parameter_ledger(submission):
    for cfg in GPT_LEDGER_CASES:
        reference = ref.GPT(ref.GPTConfig(**cfg))
        expected = {n: list(p.shape) for n, p in reference.named_parameters(remove_duplicate=False)}
        learner = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**cfg))
        rows = submission.parameters(learner)
        got = {r["name"]: r["shape"] for r in rows if isinstance(r, dict) and "name" in r and "shape" in r}
        missing = [n for n in expected if n not in got]
        extra = [n for n in got if n not in expected]
        wrong = [msg("{name} {got} (expected {expected})", name=n, got=str(got[n]),
                     expected=str(expected[n])) for n in expected
                 if n in got and got[n] != expected[n]]
        if missing or extra or wrong:
            parts = ([msg("missing {names}", names=", ".join(missing[:6]))] if missing else []) + \
                    ([msg("unexpected {names}", names=", ".join(str(n) for n in extra[:6]))] if extra else []) + \
                    ([msg("wrong shape {items}", items=join(wrong[:6], "; "))] if wrong else [])
            fail(msg("{module} does not have the parameters the exercise asks for: {problems}. Per block: ln_1 and "
                     "ln_2 (weight and bias, d each), attn.w_q/w_k/w_v/w_o (d x d), mlp.fc (d_ff x "
                     "d) and mlp.proj (d x d_ff), biases on the Linears only if config.bias; then "
                     "wte (V x d), wpe (block_size x d), ln_f, lm_head (V x d, no bias). The toy "
                     "GPT has 12,416 per block and {total:,} in all, tied.",
                     module=f"GPT({describe_config(cfg)})", problems=join(parts, "; "), total=TOY_TIED),
                 missing=missing[:20], extra=[str(n) for n in extra[:20]])
        # the reported ledger can only make this check fail; that every name takes a tensor of its
        # shape is established by loading the reference's weights (a load that does not fit fails)
        submission.load(learner, randomize(reference, seed=190).state_dict())   # sent with the next
                                                                                # request, or at the end


def counts_once(submission, what, model, reference):
    """count_parameters(model) is the number of parameters of `reference`, each Parameter once."""
    once, per_name = reference_count(reference)        # counted here, from the same config
    got = submission.gpt.count_parameters(model)
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if isinstance(got, float) and got.is_integer():
        got = int(got)
    if isinstance(got, bool) or not isinstance(got, int):
        fail(msg("count_parameters({what}) returned {got} ({type}); expected an int, the "
                 "number of parameters", what=what, got=f"{got!r:.80}", type=type_name(got)))
    if got == once:
        return
    if got == per_name and per_name != once:
        own_once, _ = unique_count(submission.parameters(model))   # the jail's ledger: wording only
        if own_once == got:
            fail(msg("count_parameters({what}) returned {got:,}, the size of your model, but the "
                     "model the exercise asks for has {once:,} parameters: with tie_weights=True "
                     "lm_head.weight must be the same Parameter as wte.weight (see the "
                     "weight-tying check).", what=what, got=got, once=once),
                 got=got, expected=once)
        fail(msg("count_parameters({what}) returned {got:,}; the model has {once:,} "
                 "parameters. The tied matrix (wte.weight = lm_head.weight, {tied:,} numbers) "
                 "is counted twice: it is ONE Parameter. model.parameters() already yields "
                 "each Parameter once; iterating named_parameters(remove_duplicate=False) or "
                 "the state_dict counts it once per name.", what=what, got=got, once=once,
                 tied=per_name - once), got=got, expected=once)
    fail(msg("count_parameters({what}) returned {got:,}; the model's parameters add up to "
             "{once:,} (each Parameter counted once: sum(p.numel() for p in "
             "model.parameters())).", what=what, got=got, once=once),
         got=got, expected=once)


@check(points=2, rule="parameter-count", day=GPT_DAY,
       title="count_parameters counts a tied matrix once", needs=("weight-tying",))
def test_count_parameters(submission):
    gpt = submission.gpt
    cases = [(msg("the toy GPT ({config})", config=describe_config(TOY)), gpt.GPT(gpt.GPTConfig(**TOY)),
              ref.GPT(ref.GPTConfig(**TOY))),
             (msg("the toy GPT with tie_weights=False"), gpt.GPT(gpt.GPTConfig(**TOY, tie_weights=False)),
              ref.GPT(ref.GPTConfig(**TOY, tie_weights=False))),
             ("LayerNorm(32)", construct(submission.norms.LayerNorm, 32), ref.LayerNorm(32)),
             ("MultiHeadAttention(32, 4, bias=True)",
              construct(submission.attention.MultiHeadAttention, 32, 4, bias=True), ref.MultiHeadAttention(32, 4, bias=True))]
    for what, model, reference in cases:
        counts_once(submission, what, model, reference)

    def counts_gpt_once(cfg):
        counts_once(submission, f"GPT({describe_config(cfg)})", gpt.GPT(gpt.GPTConfig(**cfg)),
                    ref.GPT(ref.GPTConfig(**cfg)))

    explore(gpt_configs(), counts_gpt_once, examples=6, what="count_parameters")


@check(points=3, rule="causal-mask", day=44, title="a short training run learns honestly",
       needs=("gpt-matches-reference", "gpt-has-no-future-leak"))
def test_training_probe(submission):
    cfg = dict(vocab_size=32, block_size=16, d_model=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    reference = ref.GPT(ref.GPTConfig(**cfg))      # N(0, 0.02): the first loss should be ~ ln(32)
    learner = construct(submission.gpt.GPT, submission.gpt.GPTConfig(**cfg))
    submission.load(learner, reference.state_dict())
    # 100 steps of 32 windows at lr 1e-2: a correct GPT ends near 1.5 nats (floor ln 4 = 1.39),
    # one without a causal mask falls to ~0.8 by copying the visible next token
    # judged from losses computed here: the learner's logits before and after training, and the
    # fetched trained weights run by the reference on held-out text; the jail's curve is only plotted
    what = msg("your GPT")
    probe = training_probe(submission, learner, reference, vocab_size=cfg["vocab_size"],
                           block_size=cfg["block_size"], steps=100, batch_size=32, lr=1e-2, what=what)
    judge_probe(probe, what)
