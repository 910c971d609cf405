"""Hidden tests for day45-attention: the learner's attention.py against reference_model."""
import math

import torch

import reference_model as ref
from grader.fingerprints import describe_scale, estimate_scale, guarded_causal_attention
from grader.testkit import (LearnerError, check, construct, expect_close, expect_raises, expect_shape,
                            fail, is_close, msg)

SHAPES = [  # (batch dims, T_q, T_k, d_k)
    ((2, 3), 5, 5, 4),
    ((1,), 1, 1, 8),        # T = 1
    ((3, 2), 7, 7, 16),     # odd T
    ((2,), 4, 9, 6),        # cross-attention shape: T_q != T_k
]


def randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def qkv(batch, T_q, T_k, d_k, seed, dtype=torch.float32, scale=1.0):
    return (randn(*batch, T_q, d_k, seed=seed, dtype=dtype, scale=scale),
            randn(*batch, T_k, d_k, seed=seed + 1, dtype=dtype, scale=scale),
            randn(*batch, T_k, d_k, seed=seed + 2, dtype=dtype))


def reference_in_float64(q, k, v, **kw):
    return ref.scaled_dot_product_attention(q.double(), k.double(), v.double(), **kw)


# -- stable_softmax (day 45) ----------------------------------------------------------------------

@check(points=2, rule="numerical-stability", day=45, title="softmax matches the definition")
def test_softmax_matches_reference(submission):
    for seed, (shape, dim) in enumerate([((4, 7), -1), ((2, 3, 5), 1), ((6,), 0), ((3, 1), -1)]):
        z = randn(*shape, seed=seed, scale=3.0)
        expect_close(submission.attention.stable_softmax(z, dim=dim), ref.stable_softmax(z.double(), dim=dim),
                     msg("stable_softmax(z of shape {shape}, dim={dim})", shape=shape, dim=dim),
                     dtype=z.dtype, reduction=shape[dim],
                     hint=msg("softmax(z)_i = exp(z_i - max z) / sum_j exp(z_j - max z) along `dim`."))


@check(points=2, rule="numerical-stability", day=45, title="softmax of large logits stays finite")
def test_softmax_large_logits(submission):
    z = torch.tensor([[500.0, 502.0], [-1000.0, -1001.0], [88.0, 90.0]])
    got = submission.attention.stable_softmax(z)
    expect_close(got, ref.stable_softmax(z.double()), "stable_softmax([[500, 502], ...])",
                 dtype=z.dtype, nan_symptom="softmax-overflow",
                 hint=msg("exp(500) overflows float32 (exp overflows above z = 88.7). Subtract the "
                          "max first: softmax is unchanged, and every exponent becomes <= 0."))
    half = torch.tensor([12.0, 14.0, 9.0], dtype=torch.float16)   # exp(12) overflows float16
    got = submission.attention.stable_softmax(half)
    expect_close(got, ref.stable_softmax(half.double()), "stable_softmax in float16 of [12, 14, 9]",
                 dtype=torch.float16, nan_symptom="softmax-overflow",
                 hint=msg("In float16 exp already overflows above z = 11.1; subtract the max first."))


@check(points=2, rule="numerical-stability", day=45, title="a fully masked slice gives zeros")
def test_softmax_all_minus_inf(submission):
    z = torch.tensor([[float("-inf")] * 3, [0.0, float("-inf"), 1.0]])
    expect_close(submission.attention.stable_softmax(z), ref.stable_softmax(z.double()),
                 msg("stable_softmax of a row that is all -inf"), dtype=z.dtype, nan_symptom="nan-forward",
                 hint=msg("A row whose entries are all -inf has max -inf, and -inf - (-inf) is NaN. "
                          "Return zeros for such a row instead of NaN."))


# -- scaled_dot_product_attention (days 43-45) ---------------------------------------------------

def diagnose_scale(submission):
    """Estimate the learner's scale from a two-key probe: 4 heads of d_k = 8, so d_model = 32."""
    q, k, v = qkv((2, 4), 2, 2, 8, seed=77)
    out = expect_shape(submission.attention.scaled_dot_product_attention(q, k, v), q.shape,
                       msg("scaled_dot_product_attention with q {q_shape}, k {k_shape}",
                           q_shape=tuple(q.shape), k_shape=tuple(k.shape)))
    scale = estimate_scale(out, q, k, v)
    if scale is None or abs(scale * math.sqrt(8) - 1) < 0.02:
        return                                  # the scale is right: the bug is elsewhere
    message, mutant = describe_scale(scale, d_k=8, d_model=32)
    fail(message, symptoms=["value-mismatch"], scale=scale,
         diagnosis=[{"rule": "attention-scaling", "day": 43, "mutant": mutant,
                     "message": message.params["finding"]}])


@check(points=3, rule="attention-scaling", day=43, title="attention matches softmax(QK^T/sqrt(d_k))V")
def test_attention_matches_reference(submission):
    diagnose_scale(submission)
    for seed, (batch, T_q, T_k, d_k) in enumerate(SHAPES):
        q, k, v = qkv(batch, T_q, T_k, d_k, seed=10 * seed)
        expect_close(submission.attention.scaled_dot_product_attention(q, k, v),
                     reference_in_float64(q, k, v),
                     msg("scaled_dot_product_attention with q {q_shape}, k {k_shape}",
                         q_shape=tuple(q.shape), k_shape=tuple(k.shape)),
                     dtype=q.dtype, reduction=max(T_k, d_k),
                     hint=msg("scores = q @ k^T / sqrt(d_k), softmax over the keys (last dim), then @ v."))


def diagnose_causal_mask(submission):
    """Name a known mask bug: the diagonal blocked too (row 0 sees nothing), or no mask at all."""
    q, k, v = qkv((2, 2), 5, 5, 4, seed=88)
    out = expect_shape(submission.attention.scaled_dot_product_attention(q, k, v, causal=True),
                       q.shape, msg("causal attention"))
    scale, tol = 1 / math.sqrt(4), 1e-4
    row0 = out[..., 0, :]
    if torch.isnan(row0).any() or is_close(out, guarded_causal_attention(q, k, v, scale, "diagonal=0"), tol):
        if torch.isnan(row0).any():
            message = msg("NaN on the first forward pass at query row 0: torch.triu(..., diagonal=0) "
                          "blocks each token's own position too, so row 0 has every key blocked. "
                          "Block only keys j > i: diagonal=1.")
        else:
            message = msg("query row 0 attends to nothing: torch.triu(..., diagonal=0) blocks each "
                          "token's own position too, so row 0 has every key blocked. That is NaN "
                          "on the first forward pass with a plain softmax. Block only keys j > i: "
                          "diagonal=1.")
        fail(message,
             symptoms=["nan-forward"] if torch.isnan(row0).any() else ["value-mismatch"], row=0,
             diagnosis=[{"rule": "causal-mask", "day": 44, "mutant": "mask-diagonal-0",
                         "message": msg("triu(diagonal=0): query row 0 has every key blocked (NaN "
                                        "on the first forward pass)")}])
    if is_close(out, ref.scaled_dot_product_attention(q.double(), k.double(), v.double()), tol):
        fail(msg("with causal=True your attention still lets each token see the tokens after it: "
                 "the future leaks into the past. Block key j > i with torch.triu(..., diagonal=1)."),
             symptoms=["future-leak"],
             diagnosis=[{"rule": "causal-mask", "day": 44, "mutant": "no-causal-mask",
                         "message": msg("causal=True has no effect: future tokens leak")}])


@check(points=3, rule="causal-mask", day=44, title="causal attention matches the reference")
def test_causal_attention_matches_reference(submission):
    diagnose_causal_mask(submission)
    for seed, (batch, T, _, d_k) in enumerate(SHAPES[:3]):
        q, k, v = qkv(batch, T, T, d_k, seed=100 + seed)
        expect_close(submission.attention.scaled_dot_product_attention(q, k, v, causal=True),
                     reference_in_float64(q, k, v, causal=True),
                     msg("causal attention with T = {T}", T=T), dtype=q.dtype, reduction=max(T, d_k),
                     nan_symptom="nan-forward",
                     hint=msg("causal=True blocks key j > query i, and only those: each position "
                              "sees itself and the past, so row 0 attends to key 0."))


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


@check(points=2, rule="numerical-stability", day=45, title="masks, and a query with every key blocked")
def test_attention_with_mask_and_fully_blocked_rows(submission):
    B, T, d_k = 2, 5, 4
    q, k, v = qkv((B, 2), T, T, d_k, seed=21)
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    mask[0, 0, :, 3:] = True                # batch 0: keys 3 and 4 blocked for every query
    mask[1, 0, 2, :] = True                 # batch 1: query 2 has every key blocked
    got = submission.attention.scaled_dot_product_attention(q, k, v, mask=mask)
    expect_close(got, reference_in_float64(q, k, v, mask=mask), msg("attention with a boolean mask"),
                 dtype=q.dtype, reduction=T, nan_symptom="nan-forward",
                 hint=msg("mask is True where attention is blocked. A query whose keys are all "
                          "blocked must get a zero output, not NaN: softmax of all -inf is 0/0."))
    both = submission.attention.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    expect_close(both, reference_in_float64(q, k, v, mask=mask, causal=True),
                 msg("attention with a mask and causal=True together"), dtype=q.dtype, reduction=T,
                 nan_symptom="nan-forward", hint=msg("The mask and the causal mask combine: "
                                                     "blocked if either blocks."))


@check(points=3, rule="numerical-stability", day=45, title="attention in float16 and bfloat16")
def test_attention_in_half_precision(submission):
    B, T, d_k = 2, 6, 8
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    mask[1, 0, 0, :] = True                 # a fully blocked query in half precision too
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = qkv((B, 2), T, T, d_k, seed=31, dtype=dtype, scale=2.0)
        try:
            got = submission.attention.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
        except LearnerError as exc:
            if exc.is_a("NotImplementedError"):
                raise
            fail(msg("attention in {dtype} raised {type}: {message}. A constant like -1e9 does not "
                     "fit in float16 (its largest value is 65504); fill blocked scores with "
                     "float('-inf') or torch.finfo(scores.dtype).min.", dtype=str(dtype)[6:],
                     type=exc.type_name, message=exc.learner_message),
                 symptoms=["fp16-overflow"])
        expect_close(got, reference_in_float64(q, k, v, mask=mask, causal=True),
                     msg("causal attention in {dtype}", dtype=str(dtype)[6:]), dtype=dtype,
                     reduction=T, nan_symptom="fp16-overflow",
                     hint=msg("In half precision every masking constant must fit the dtype."))


# -- heads (day 45) --------------------------------------------------------------------------------

@check(points=2, rule="head-split", day=45, title="split_heads and merge_heads")
def test_split_and_merge_heads(submission):
    for B, T, d_model, h in [(2, 5, 12, 3), (1, 1, 8, 1), (3, 7, 16, 4)]:
        x = randn(B, T, d_model, seed=B * T)
        heads = submission.attention.split_heads(x, h)
        expect_close(heads, ref.split_heads(x, h),
                     msg("split_heads of {shape} into {h} heads", shape=(B, T, d_model), h=h),
                     dtype=x.dtype,
                     hint=msg("view(B, T, h, d_k) then transpose(1, 2): head i owns features "
                              "[i*d_k, (i+1)*d_k). A view straight to (B, h, T, d_k) mixes "
                              "positions."))
        expect_close(submission.attention.merge_heads(ref.split_heads(x, h)), x,
                     f"merge_heads(split_heads(x, {h}))", dtype=x.dtype,
                     hint=msg("merge_heads undoes split_heads: transpose(1, 2) back, then reshape."))


@check(points=1, rule="api-contract", day=45, title="n_head must divide d_model")
def test_mha_rejects_indivisible_heads(submission):
    exc = expect_raises(lambda: submission.attention.MultiHeadAttention(10, 3), "ValueError",
                        "MultiHeadAttention(d_model=10, n_head=3)",
                        hint=msg("d_k = d_model // n_head must be a whole number."))
    if "n_head" not in exc.learner_message and "d_model" not in exc.learner_message:
        fail(msg("the ValueError should name the argument that is wrong (n_head or d_model), got: "
                 "{message}", message=repr(exc.learner_message)))


def mha_pair(submission, d_model, n_head, bias, seed):
    torch.manual_seed(seed)
    reference = ref.MultiHeadAttention(d_model, n_head, bias=bias)
    learner = construct(submission.attention.MultiHeadAttention, d_model, n_head, bias=bias)
    submission.load(learner, reference.state_dict())
    return reference, learner


@check(points=4, rule="head-split", day=45, title="multi-head attention matches the reference")
def test_mha_matches_reference(submission):
    for seed, (B, T, d_model, h, bias) in enumerate([(2, 5, 8, 2, True), (1, 1, 8, 1, False),
                                                     (3, 7, 16, 4, False), (2, 4, 12, 3, True)]):
        reference, learner = mha_pair(submission, d_model, h, bias, seed)
        x = randn(B, T, d_model, seed=seed)
        for causal in (True, False):
            expect_close(learner(x, causal=causal), reference.double()(x.double(), causal=causal),
                         msg("MultiHeadAttention(d_model={d_model}, n_head={h}) with causal={causal}",
                             d_model=d_model, h=h, causal=str(causal)),
                         dtype=x.dtype, reduction=d_model, nan_symptom="nan-forward",
                         hint=msg("Project with w_q, w_k, w_v, split into heads, attend per head, "
                                  "merge, then project with w_o."))
            reference.float()


@check(points=2, rule="causal-mask", day=45, title="padding_mask blocks padded keys")
def test_mha_padding_mask(submission):
    B, T, d_model, h = 2, 6, 8, 2
    reference, learner = mha_pair(submission, d_model, h, True, seed=5)
    x = randn(B, T, d_model, seed=9)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[0, 4:] = True
    pad[1, 1:] = True
    expect_close(learner(x, causal=True, padding_mask=pad),
                 reference.double()(x.double(), causal=True, padding_mask=pad),
                 msg("MultiHeadAttention with a padding_mask"), dtype=x.dtype, reduction=d_model,
                 hint=msg("padding_mask (B, T) is True where a KEY is padding; reshape it to "
                          "(B, 1, 1, T) so it blocks that key for every head and query."))


@check(points=2, rule="causal-mask", day=44, title="multi-head attention never sees the future")
def test_mha_has_no_future_leak(submission):
    B, T, d_model, h = 2, 7, 8, 2
    _, learner = mha_pair(submission, d_model, h, True, seed=3)
    x = randn(B, T, d_model, seed=4)
    base = expect_shape(learner(x), (B, T, d_model), "MultiHeadAttention")
    for t in (0, 3, 5):
        x2 = x.clone()
        x2[:, t + 1:] = randn(B, T - t - 1, d_model, seed=40 + t)
        if not torch.allclose(learner(x2)[:, :t + 1], base[:, :t + 1], atol=1e-5, equal_nan=True):
            fail(msg("changing tokens after position {t} changed outputs at positions <= {t}: "
                     "MultiHeadAttention's default causal=True must block the future.", t=t),
                 symptoms=["future-leak"], position=t)


@check(points=2, rule="head-split", day=45, title="attention is permutation-equivariant")
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
