"""Hidden tests for day45-attention: the learner's attention.py against reference_model.

Inputs are drawn from the whole contract (grader.testkit.explore: seeded, shrunk to the smallest
failing input) and compared with the float64 reference within the conditioned tolerance; the
corner cases a course's staff would write by hand run first, as written."""
import math

import torch
from hypothesis import strategies as st

import reference_model as ref
from grader.testkit import (LearnerError, batch_dims, check, conditioned_tolerance, construct, corner,
                            expect_close, expect_raises, expect_shape, explore, fail, float_dtypes, is_close,
                            magnitudes, msg, random_tensor, seeds, sizes)

SHAPES = [  # (batch dims, T_q, T_k, d_k)
    ((2, 3), 5, 5, 4),
    ((1,), 1, 1, 8),        # T = 1
    ((3, 2), 7, 7, 16),     # odd T
    ((2,), 4, 9, 6),        # cross-attention shape: T_q != T_k
]


def randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    return random_tensor(shape, dtype=dtype, seed=seed, scale=scale)


def qkv(batch, T_q, T_k, d_k, seed, dtype=torch.float32, scale=1.0, d_v=None):
    return (randn(*batch, T_q, d_k, seed=seed, dtype=dtype, scale=scale),
            randn(*batch, T_k, d_k, seed=seed + 1, dtype=dtype, scale=scale),
            randn(*batch, T_k, d_v or d_k, seed=seed + 2, dtype=dtype))


def reference_in_float64(q, k, v, **kw):
    return ref.scaled_dot_product_attention(q.double(), k.double(), v.double(), **kw)


# -- stable_softmax (day 45) ----------------------------------------------------------------------

# The largest offset a slice of logits gets, per dtype: far past where exp overflows (88.7 in
# float32, 11.1 in float16) and, negative, far below where it underflows; float16 holds 65504 at most.
OFFSETS = {torch.float32: 1e5, torch.bfloat16: 1e5, torch.float16: 3e4}


@st.composite
def logits(draw, *, magnitude=magnitudes([1.0, 3.0]), offset=False, blocked=False):
    """Logits z of any shape (batch dims 0-3), a dim of it, any float dtype; `offset` shifts every
    slice far up or down, `blocked` sets entries to -inf and one slice entirely."""
    shape = (*draw(batch_dims()), draw(sizes(1, 9)))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    dtype = draw(float_dtypes())
    z = random_tensor(shape, dtype=torch.float64, seed=draw(seeds()), scale=draw(magnitude))
    if offset:
        z = z + draw(st.sampled_from([0.0, 1.0, -1.0, 0.2, -0.2])) * OFFSETS[dtype]
    z = z.clamp(-OFFSETS[dtype], OFFSETS[dtype])
    if blocked:
        g = torch.Generator().manual_seed(draw(seeds()))
        z = z.masked_fill(torch.rand(shape, generator=g, dtype=torch.float64) < 0.5, float("-inf"))
        first_slice = [0] * len(shape)
        first_slice[dim] = slice(None)
        z[tuple(first_slice)] = float("-inf")      # a slice with every entry -inf
    return {"z": z.to(dtype), "dim": dim}


def softmax_prop(submission, **expect):
    def prop(case):
        z, dim = case["z"], case["dim"]
        expect_close(submission.attention.stable_softmax(z, dim=dim), ref.stable_softmax(z.double(), dim=dim),
                     msg("stable_softmax(z of shape {shape}, dim={dim})", shape=tuple(z.shape), dim=dim),
                     dtype=z.dtype, reduction=z.shape[dim], tol=lambda: conditioned_tolerance(
                         lambda z: ref.stable_softmax(z, dim=dim), [z], z.dtype, reduction=z.shape[dim],
                         exponential=True),
                     **expect)
    return prop


@check(points=2, rule="numerical-stability", day=45, title="softmax matches the definition")
def test_softmax_matches_reference(submission):
    corners = [{"z": randn(*shape, seed=seed, scale=3.0), "dim": dim}
               for seed, (shape, dim) in enumerate([((2, 3, 5), 1), ((3, 1), -1)])]
    explore(logits(), softmax_prop(submission, hint=msg(
        "softmax(z)_i = exp(z_i - max z) / sum_j exp(z_j - max z) along `dim`.")),
        corners=corners, what="stable_softmax")


@check(points=2, rule="numerical-stability", day=45, title="softmax of large logits stays finite")
def test_softmax_large_logits(submission):
    # the contract's own examples first, as written: the symptom of an overflow is what they show
    corner({"z": torch.tensor([[500.0, 502.0], [-1000.0, -1001.0], [88.0, 90.0]]), "dim": -1},
           softmax_prop(submission, nan_symptom="softmax-overflow", hint=msg(
               "exp(500) overflows float32 (exp overflows above z = 88.7). Subtract the max first: "
               "softmax is unchanged, and every exponent becomes <= 0.")), what="stable_softmax")
    corner({"z": torch.tensor([12.0, 14.0, 9.0], dtype=torch.float16), "dim": -1},  # exp(12) overflows float16
           softmax_prop(submission, nan_symptom="softmax-overflow", hint=msg(
               "In float16 exp already overflows above z = 11.1; subtract the max first.")), what="stable_softmax")
    explore(logits(magnitude=magnitudes([3.0, 30.0, 500.0, 1e4]), offset=True),
            softmax_prop(submission, nan_symptom="softmax-overflow", hint=msg(
                "Subtract the max of each slice first, and nothing else (no floor or clamp on it): "
                "then the largest exponent is exactly 0, whatever the logits' magnitude, and the sum "
                "is at least 1. exp overflows above z = 88.7 in float32 and underflows to 0 below "
                "about z = -103.")),
            corners=[{"z": torch.tensor([-20000.0, -19998.0, -19999.0]), "dim": -1}],  # every exp(z) is 0
            what="stable_softmax")


@check(points=2, rule="numerical-stability", day=45, title="a fully masked slice gives zeros")
def test_softmax_all_minus_inf(submission):
    corner = {"z": torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 1.0]]), "dim": -1}
    explore(logits(blocked=True), softmax_prop(submission, nan_symptom="nan-forward", hint=msg(
        "A row whose entries are all -inf has max -inf, and -inf - (-inf) is NaN. Return zeros for "
        "such a row instead of NaN.")), corners=[corner], what="stable_softmax")


@check(points=1, rule="api-contract", day=45, title="stable_softmax defaults to the last dim",
       needs=("softmax-matches-reference",))
def test_softmax_default_dim(submission):
    # Called without `dim`, stable_softmax normalises the last dim (dim=-1), as attention calls it
    # on (..., T_q, T_k) scores. On a 2-D input dim=1 is the last dim too: the inputs are 3-D and 4-D.
    for seed, shape in enumerate([(2, 3, 5), (2, 2, 3, 4)]):
        softmax_of_last_dim(submission, randn(*shape, seed=200 + seed, scale=3.0))


def softmax_of_last_dim(submission, z):
    def last_dim(z):
        return ref.stable_softmax(z, dim=-1)
    n = z.shape[-1]
    expect_close(submission.attention.stable_softmax(z), last_dim(z.double()),
                 f"stable_softmax(z) on z of shape {tuple(z.shape)}", dtype=z.dtype, reduction=n,
                 tol=lambda: conditioned_tolerance(last_dim, [z], z.dtype, reduction=n, exponential=True),
                 hint=msg("stable_softmax(z, dim=-1): without a dim it normalises the last one."))


# -- scaled_dot_product_attention (days 43-45) ---------------------------------------------------

@st.composite
def mask_of(draw, shape):
    """A bool mask broadcastable to `shape` (..., T_q, T_k): trailing dims kept, each either full
    or 1, leading dims dropped; sparse or dense, so some queries end up with every key blocked."""
    ndim = draw(st.integers(0, len(shape)))
    kept = shape[len(shape) - ndim:]
    mask_shape = tuple(n if draw(st.booleans()) else 1 for n in kept)
    g = torch.Generator().manual_seed(draw(seeds()))
    return torch.rand(mask_shape, generator=g) < draw(st.sampled_from([0.3, 0.7, 1.0]))


@st.composite
def attention_inputs(draw, *, dtypes=(torch.float32,), causal=(False,), masked=False,
                     magnitude=magnitudes([1.0, 3.0])):
    """q, k, v for scaled_dot_product_attention from the whole contract: batch dims 0-3, T_q and
    T_k from 1 (either larger), d_v != d_k, large scores; a mask of any broadcastable shape."""
    batch, T_q, T_k = draw(batch_dims()), draw(sizes(1, 7)), draw(sizes(1, 7))
    d_k, d_v = draw(sizes(1, 8)), draw(sizes(1, 8))
    dtype, seed, scale = draw(float_dtypes(dtypes)), draw(seeds()), draw(magnitude)
    q, k, v = qkv(batch, T_q, T_k, d_k, seed=seed, dtype=dtype, scale=scale, d_v=d_v)
    case = {"q": q, "k": k, "v": v}
    if masked and draw(st.booleans()):
        case["mask"] = draw(mask_of((*batch, T_q, T_k)))
    if draw(st.sampled_from(causal)):
        case["causal"] = True
    return case


def attention_prop(submission, **expect):
    """The learner's attention of a case against the float64 reference; only the arguments a case
    sets are passed (mask=, causal=), as a learner's own call would."""
    def prop(case):
        q, k, v = case["q"], case["k"], case["v"]
        options = {name: case[name] for name in ("mask", "causal") if name in case}
        got = call_attention(submission, q, k, v, options)

        def reference(q, k, v):
            return ref.scaled_dot_product_attention(q, k, v, **options)
        reduction = max(k.size(-2), q.size(-1))
        expected = reference_in_float64(q, k, v, **options)
        expect_close(got, expected, attention_call(options), dtype=q.dtype, reduction=reduction,
                     tol=lambda: conditioned_tolerance(reference, [q, k, v], q.dtype, reduction=reduction),
                     **expect)
    return prop


def call_attention(submission, q, k, v, options):
    return submission.attention.scaled_dot_product_attention(q, k, v, **options)


def attention_call(options):
    return "scaled_dot_product_attention(q, k, v{})".format(
        "".join(f", {name}={'True' if name == 'causal' else '...'}" for name in options))


@check(points=3, rule="attention-scaling", day=43, title="attention matches softmax(QK^T/sqrt(d_k))V",
       needs=("softmax-matches-reference", "softmax-large-logits"))
def test_attention_matches_reference(submission):
    corners = [dict(zip("qkv", qkv(batch, T_q, T_k, d_k, seed=10 * seed)))
               for seed, (batch, T_q, T_k, d_k) in enumerate(SHAPES) if seed % 2]  # T = 1; T_q != T_k
    explore(attention_inputs(magnitude=magnitudes([1.0, 3.0, 10.0])), attention_prop(submission, hint=msg(
        "scores = q @ k^T / sqrt(d_k), softmax over the keys (last dim), then @ v.")),
        corners=corners, what="scaled_dot_product_attention")


@check(points=3, rule="causal-mask", day=44, title="causal attention matches the reference",
       needs=("attention-matches-reference",))
def test_causal_attention_matches_reference(submission):
    corners = [{**dict(zip("qkv", qkv(batch, T_q, T_k, d_k, seed=100 + seed))), "causal": True}
               for seed, (batch, T_q, T_k, d_k) in enumerate([((2,), 4, 9, 6), ((2,), 9, 4, 6), ((), 1, 6, 4)])]
    explore(attention_inputs(causal=(True,)), attention_prop(submission, nan_symptom="nan-forward", hint=msg(
        "causal=True blocks key j > query i, and only those, aligned top-left whatever T_q and T_k "
        "are: query i sees keys 0..i, so row 0 attends to key 0 (torch.triu(torch.ones(T_q, T_k), "
        "diagonal=1) is the blocked set).")), corners=corners, what="scaled_dot_product_attention")


@check(points=2, rule="causal-mask", day=44, title="causal attention never sees the future")
def test_causal_attention_has_no_future_leak(submission):
    T, d_k = 6, 8
    q, k, v = qkv((2,), T, T, d_k, seed=7)
    base = expect_shape(submission.attention.scaled_dot_product_attention(q, k, v, causal=True),
                        (2, T, d_k), msg("causal attention"))
    for t in range(T - 1):
        k2, v2 = k.clone(), v.clone()
        k2[:, t + 1:] = randn(2, T - t - 1, d_k, seed=50 + t)
        v2[:, t + 1:] = randn(2, T - t - 1, d_k, seed=60 + t)
        changed = submission.attention.scaled_dot_product_attention(q, k2, v2, causal=True)
        if not torch.allclose(changed[:, :t + 1], base[:, :t + 1], atol=1e-6, equal_nan=True):
            fail(msg("changing keys and values after position {t} changed the output at positions "
                     "<= {t}: the future leaks into the past. With causal=True, block every key "
                     "j > i with torch.triu(..., diagonal=1).", t=t),
                 symptoms=["future-leak"], position=t)


@check(points=2, rule="numerical-stability", day=45, title="masks, and a query with every key blocked",
       needs=("attention-matches-reference", "causal-attention-matches-reference"))
def test_attention_with_mask_and_fully_blocked_rows(submission):
    B, T, d_k = 2, 5, 4
    q, k, v = qkv((B, 2), T, T, d_k, seed=21)
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    mask[0, 0, :, 3:] = True                # batch 0: keys 3 and 4 blocked for every query
    mask[1, 0, 2, :] = True                 # batch 1: query 2 has every key blocked
    left_padded = torch.zeros(B, 1, 1, T, dtype=torch.bool)
    left_padded[1, ..., :2] = True          # with causal=True, queries 0 and 1 of batch 1 see no key
    corners = [{"q": q, "k": k, "v": v, "mask": mask}, {"q": q, "k": k, "v": v, "mask": mask, "causal": True},
               {"q": q, "k": k, "v": v, "mask": left_padded, "causal": True}]
    explore(attention_inputs(causal=(False, True), masked=True),
            attention_prop(submission, nan_symptom="nan-forward", hint=msg(
                "mask is True where attention is blocked, and combines with causal=True: blocked if "
                "either blocks. A query whose keys are all blocked (by the mask, by causal, or by both "
                "together) must get a zero output, not NaN: softmax of all -inf is 0/0.")),
            corners=corners, what="scaled_dot_product_attention")


def half_precision_prop(submission):
    prop = attention_prop(submission, nan_symptom="fp16-overflow",
                          hint=msg("In half precision every masking constant must fit the dtype."))

    def guarded(case):
        try:
            prop(case)
        except LearnerError as exc:
            if exc.is_a("NotImplementedError"):
                raise
            dtype = str(case["q"].dtype)[6:]
            fail(msg("attention in {dtype} raised {type}: {message}. A constant like -1e9 does not "
                     "fit in float16 (its largest value is 65504); fill blocked scores with "
                     "float('-inf') or torch.finfo(scores.dtype).min.", dtype=dtype,
                     type=exc.type_name, message=exc.learner_message),
                 symptoms=["fp16-overflow"])
    return guarded


@check(points=3, rule="numerical-stability", day=45, title="attention in float16 and bfloat16",
       needs=("attention-matches-reference", "causal-attention-matches-reference",
              "attention-with-mask-and-fully-blocked-rows"))
def test_attention_in_half_precision(submission):
    B, T, d_k = 2, 6, 8
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    mask[1, 0, 0, :] = True                 # a fully blocked query in half precision too
    corners = [{**dict(zip("qkv", qkv((B, 2), T, T, d_k, seed=31, dtype=dtype, scale=2.0))), "mask": mask,
                "causal": True} for dtype in (torch.float16, torch.bfloat16)]
    explore(attention_inputs(dtypes=(torch.float16, torch.bfloat16), causal=(False, True), masked=True),
            half_precision_prop(submission), corners=corners, what="scaled_dot_product_attention")


# -- heads (day 45) --------------------------------------------------------------------------------

@st.composite
def head_inputs(draw):
    """x (B, T, d_model) and a head count that divides d_model: T = 1, d_k = 1, one head or more."""
    B, T, n_head, d_k = draw(sizes(1, 3)), draw(sizes(1, 7)), draw(sizes(1, 4)), draw(sizes(1, 4))
    return {"x": randn(B, T, n_head * d_k, seed=draw(seeds())), "n_head": n_head}


def split_and_merge_prop(submission):
    def prop(case):
        x, h = case["x"], case["n_head"]
        heads = submission.attention.split_heads(x, h)
        expect_close(heads, ref.split_heads(x, h),
                     msg("split_heads of {shape} into {h} heads", shape=tuple(x.shape), h=h),
                     dtype=x.dtype,
                     hint=msg("view(B, T, h, d_k) then transpose(1, 2): head i owns features "
                              "[i*d_k, (i+1)*d_k). A view straight to (B, h, T, d_k) mixes "
                              "positions."))
        expect_close(submission.attention.merge_heads(ref.split_heads(x, h)), x,
                     f"merge_heads(split_heads(x, {h}))", dtype=x.dtype,
                     hint=msg("merge_heads undoes split_heads: transpose(1, 2) back, then reshape."))
    return prop


@check(points=2, rule="head-split", day=45, title="split_heads and merge_heads")
def test_split_and_merge_heads(submission):
    corners = [{"x": randn(B, T, d_model, seed=B * T), "n_head": h}
               for B, T, d_model, h in [(3, 7, 16, 4)]]
    explore(head_inputs(), split_and_merge_prop(submission), corners=corners, what="split_heads")


# (d_model, n_head) that leave no whole d_k. n_head = 0 is not among them: SPEC's test is
# d_model % n_head, which raises ZeroDivisionError there, as correct learner code does too.
BAD_HEADS = [(10, 3), (12, 5)]


@check(points=1, rule="api-contract", day=45, title="n_head must divide d_model")
def test_mha_rejects_indivisible_heads(submission):
    hint = msg("d_k = d_model // n_head must be a whole number.")
    for d_model, n_head in BAD_HEADS:
        exc = expect_raises(lambda: submission.attention.MultiHeadAttention(d_model, n_head),
                            "ValueError", f"MultiHeadAttention(d_model={d_model}, n_head={n_head})",
                            hint=hint)
        expect_names_heads(exc)
        x = randn(2, 3, d_model, seed=d_model)
        exc = expect_raises(lambda: submission.attention.split_heads(x, n_head), "ValueError",
                            f"split_heads(x of shape {tuple(x.shape)}, n_head={n_head})", hint=hint)
        expect_names_heads(exc)


def expect_names_heads(exc):
    # the argument named in any spelling learners' sources use: n_head, num_heads, heads; d_model, embed_dim, dim
    if not any(word in str(exc.learner_message).lower() for word in ("head", "d_model", "dim")):
        fail(msg("the ValueError should name the argument that is wrong (n_head or d_model), got: "
                 "{message}", message=repr(exc.learner_message)))


def mha_pair(submission, d_model, n_head, bias, seed):
    torch.manual_seed(seed)
    reference = ref.MultiHeadAttention(d_model, n_head, bias=bias)
    learner = construct(submission.attention.MultiHeadAttention, d_model, n_head, bias=bias)
    submission.load(learner, reference.state_dict())
    return reference, learner


@st.composite
def mha_inputs(draw, *, padded=False):
    """A MultiHeadAttention (d_model = n_head * d_k, bias or not, weights from a seed) and x, with
    causal on or off; `padded`: a padding_mask, some rows all padding, so that with causal=True
    some queries see no key at all."""
    B, T, n_head, d_k = draw(sizes(1, 3)), draw(sizes(1, 6)), draw(sizes(1, 3)), draw(sizes(1, 4))
    case = {"d_model": n_head * d_k, "n_head": n_head, "bias": draw(st.booleans()),
            "x": randn(B, T, n_head * d_k, seed=draw(seeds())), "causal": draw(st.booleans())}
    if padded:
        g = torch.Generator().manual_seed(draw(seeds()))
        case["padding_mask"] = torch.rand(B, T, generator=g) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    return case


def mha_prop(submission, **expect):
    def prop(case):
        d_model, h, x = case["d_model"], case["n_head"], case["x"]
        reference, learner = mha_pair(submission, d_model, h, case["bias"], seed=d_model * 7 + h)
        options = {name: case[name] for name in ("causal", "padding_mask") if name in case}
        got = learner(x, **options)
        exact = reference.double()
        expected = exact(x.double(), **options)
        expect_close(got, expected,
                     msg("MultiHeadAttention(d_model={d_model}, n_head={h}) with causal={causal}",
                         d_model=d_model, h=h, causal=str(options["causal"])),
                     dtype=x.dtype, reduction=d_model, tol=lambda: conditioned_tolerance(
                         lambda x: exact(x, **options), [x], x.dtype, reduction=d_model), **expect)
    return prop


@check(points=4, rule="head-split", day=45, title="multi-head attention matches the reference",
       needs=("split-and-merge-heads", "attention-matches-reference", "causal-attention-matches-reference"))
def test_mha_matches_reference(submission):
    corners = [{"d_model": d_model, "n_head": h, "bias": bias, "x": randn(B, T, d_model, seed=seed),
                "causal": causal}
               for seed, (B, T, d_model, h, bias, causal) in enumerate([
                   (2, 5, 8, 2, True, True), (1, 1, 8, 1, False, False), (3, 7, 16, 4, False, True),
                   (2, 4, 12, 3, True, False)])]
    explore(mha_inputs(), mha_prop(submission, nan_symptom="nan-forward", hint=msg(
        "Project with w_q, w_k, w_v, split into heads, attend per head, merge, then project with w_o.")),
        corners=corners, examples=4, what="MultiHeadAttention")


@check(points=2, rule="causal-mask", day=45, title="padding_mask blocks padded keys",
       needs=("mha-matches-reference", "split-and-merge-heads", "attention-matches-reference",
              "causal-attention-matches-reference", "attention-with-mask-and-fully-blocked-rows"))
def test_mha_padding_mask(submission):
    B, T, d_model, h = 2, 6, 8, 2
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1, 1:] = True
    corner = {"d_model": d_model, "n_head": h, "bias": True, "x": randn(B, T, d_model, seed=9),
              "causal": True, "padding_mask": pad}
    explore(mha_inputs(padded=True), mha_prop(submission, nan_symptom="nan-forward", hint=msg(
        "padding_mask (B, T) is True where a KEY is padding; reshape it to (B, 1, 1, T) so it blocks "
        "that key for every head and query. A query that sees no key (padding and causal together) "
        "gets a zero output.")), corners=[corner], examples=4, what="MultiHeadAttention")


def wrong_head_split(submission) -> bool:
    """Whether the learner's split_heads gives a wrong result (which bug it is, the mutant the
    learner's calls match names)."""
    x = randn(2, 3, 8, seed=5)
    try:
        got = submission.attention.split_heads(x, 2)
    except LearnerError as exc:
        if exc.is_a("NotImplementedError"):
            raise
        return True
    return not isinstance(got, torch.Tensor) or got.shape != (2, 2, 3, 4) or not is_close(
        got, ref.split_heads(x, 2), 1e-6)


@check(points=2, rule="causal-mask", day=44, title="multi-head attention never sees the future",
       needs=("split-and-merge-heads", "attention-matches-reference", "causal-attention-matches-reference"))
def test_mha_has_no_future_leak(submission):
    B, T, d_model, h = 2, 7, 8, 2
    _, learner = mha_pair(submission, d_model, h, True, seed=3)
    x = randn(B, T, d_model, seed=4)
    base = expect_shape(learner(x), (B, T, d_model), "MultiHeadAttention")
    for t in (0, 3, 5):
        x2 = x.clone()
        x2[:, t + 1:] = randn(B, T - t - 1, d_model, seed=40 + t)
        if torch.allclose(learner(x2)[:, :t + 1], base[:, :t + 1], atol=1e-5, equal_nan=True):
            continue
        if wrong_head_split(submission):
            # the mask may be right: a head split that mixes positions carries the future in
            fail(msg("changing tokens after position {t} changed outputs at positions <= {t}, and "
                     "your split_heads does not give head i the features [i*d_k, (i+1)*d_k) of each "
                     "position (see the split_heads check): a head split that mixes positions lets "
                     "the future in whatever the mask blocks. Fix split_heads first: view(B, T, h, "
                     "d_k).transpose(1, 2).", t=t),
                 symptoms=["future-leak"], position=t)
        fail(msg("changing tokens after position {t} changed outputs at positions <= {t}: "
                 "MultiHeadAttention's default causal=True must block the future.", t=t),
             symptoms=["future-leak"], position=t)


@check(points=2, rule="head-split", day=45, title="attention is permutation-equivariant",
       needs=("split-and-merge-heads",))
def test_mha_is_permutation_equivariant(submission):
    B, T, d_model, h = 2, 6, 12, 3
    _, learner = mha_pair(submission, d_model, h, False, seed=8)
    x = randn(B, T, d_model, seed=12)
    perm = torch.randperm(T, generator=torch.Generator().manual_seed(1))
    out = expect_shape(learner(x, causal=False), (B, T, d_model), "MultiHeadAttention(causal=False)")
    expect_close(learner(x[:, perm], causal=False), out[:, perm],
                 msg("attention of permuted tokens (without positions it should just permute the "
                     "output)"),
                 dtype=x.dtype, reduction=d_model,
                 hint=msg("Without a mask or positions, attention treats tokens "
                 "as a set. If permuting the input does more than permute the output, the head "
                 "split mixes positions: use view(B, T, h, d_k).transpose(1, 2)."))


@check(points=2, rule="parameter-count", day=45, title="the parameter ledger")
def test_mha_parameter_count(submission):
    for d_model, h, bias in [(4, 2, False), (4, 2, True), (768, 12, True)]:
        learner = construct(submission.attention.MultiHeadAttention, d_model, h, bias=bias)
        reference = ref.MultiHeadAttention(d_model, h, bias=bias)
        expected = sum(p.numel() for p in reference.parameters())     # counted here
        # the ledger the jail reports can only fail this check (and words the message); that the
        # module takes each of the reference's tensors is established by loading them
        rows = [r for r in submission.parameters(learner) if isinstance(r, dict)]
        total = sum(math.prod(r.get("shape", [])) for r in rows)
        if d_model <= 64:             # sent with the next request; the 768-wide one only counts
            submission.load(learner, reference.state_dict())
        if total != expected:
            if bias:
                message = msg("MultiHeadAttention(d_model={d_model}, n_head={h}, bias={bias}) has "
                              "{total:,} parameters; W_Q, W_K, W_V, W_O are each d_model x d_model "
                              "plus a bias of d_model, so {expected:,}.", d_model=d_model, h=h,
                              bias=str(bias), total=total, expected=expected)
            else:
                message = msg("MultiHeadAttention(d_model={d_model}, n_head={h}, bias={bias}) has "
                              "{total:,} parameters; W_Q, W_K, W_V, W_O are each d_model x "
                              "d_model, so {expected:,}.", d_model=d_model, h=h, bias=str(bias),
                              total=total, expected=expected)
            fail(message, got=total, expected=expected)
