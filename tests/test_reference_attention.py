"""reference_model.attention against independent implementations (days 43-45).

Every expected value here comes from PyTorch's own attention (F.scaled_dot_product_attention,
nn.MultiheadAttention, torch.softmax) or from a float64 computation, never from the reference.

Mask conventions differ, and the tests convert explicitly:
- ours (SPEC) and nn.MultiheadAttention: a bool mask is True where attention is BLOCKED;
- F.scaled_dot_product_attention: a bool attn_mask is True where attention is ALLOWED.
A query whose keys are all blocked gets a zero output from ours and NaN from PyTorch, so those
rows are checked separately and excluded from the comparison.
"""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_model.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    stable_softmax,
)


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def causal_blocked(T_q, T_k):
    """True where key j is in the future of query i (j > i)."""
    return torch.ones(T_q, T_k, dtype=torch.bool).triu(diagonal=1)


def torch_attention(q, k, v, blocked):
    """PyTorch's attention with our True=blocked mask translated to its True=allowed mask."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=~blocked)


def float64_attention(q, k, v, blocked):
    """softmax(q k^T / sqrt(d_k)) v in float64, written out; fully blocked rows give 0."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    blocked = blocked.expand_as(scores)
    scores = scores.masked_fill(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(nan=0.0)   # all -inf row: NaN -> 0
    return weights @ v


# --------------------------------------------------------------------------- stable_softmax

def test_softmax_of_500_and_502_is_finite_and_matches_the_quiz():
    z = torch.tensor([500.0, 502.0])

    p = stable_softmax(z)

    assert torch.isfinite(p).all(), f"softmax([500, 502]) must be finite, got {p}"
    expected = torch.tensor([0.1192, 0.8808])
    assert torch.allclose(p, expected, atol=5e-4), f"softmax([500, 502]) = {p}, expected {expected}"


def test_softmax_of_an_all_minus_inf_slice_is_zeros_not_nan():
    z = torch.tensor([[float("-inf")] * 4, [1.0, 2.0, float("-inf"), 0.5]])

    p = stable_softmax(z, dim=-1)

    assert not torch.isnan(p).any(), f"an all -inf slice must not give NaN, got {p}"
    assert torch.equal(p[0], torch.zeros(4)), f"an all -inf slice must give zeros, got {p[0]}"
    expected_row1 = torch.softmax(z[1], dim=-1)
    assert torch.allclose(p[1], expected_row1, atol=1e-6), "the other slice is an ordinary softmax"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_softmax_of_large_half_precision_logits_stays_finite(dtype):
    # exp(12) already overflows float16 (max 65504); without the max shift this is inf / inf
    z = torch.tensor([[20.0, 25.0, 30.0], [60000.0, 60000.0, 59990.0]], dtype=dtype)

    p = stable_softmax(z, dim=-1)

    assert p.dtype == dtype, f"softmax must keep the input dtype {dtype}, got {p.dtype}"
    assert torch.isfinite(p).all(), f"large {dtype} logits must give finite probabilities, got {p}"
    expected = torch.softmax(z.double(), dim=-1)
    assert torch.allclose(p.double(), expected, atol=1e-2), f"got {p}, expected {expected}"


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 4, 6), 1),
                                       ((2, 3, 4, 5), -1)])
def test_softmax_matches_torch_softmax_along_any_dim(shape, dim):
    z = randn(*shape, seed=1) * 5

    p = stable_softmax(z, dim=dim)

    assert p.shape == z.shape, f"softmax must keep the shape {z.shape}, got {p.shape}"
    assert torch.allclose(p, torch.softmax(z, dim=dim), atol=1e-6), f"dim={dim}: values differ"


def test_softmax_with_some_minus_inf_entries_matches_torch_softmax():
    z = randn(4, 6, seed=2)
    z[z < -0.5] = float("-inf")
    z[:, 0] = 0.0                                     # every row keeps at least one finite entry

    p = stable_softmax(z, dim=-1)

    assert torch.allclose(p, torch.softmax(z, dim=-1), atol=1e-6)
    assert torch.equal(p[torch.isneginf(z)], torch.zeros_like(p[torch.isneginf(z)])), \
        "a -inf logit must get probability exactly 0"


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), min_size=1, max_size=12))
def test_softmax_is_a_finite_distribution_for_any_finite_float32_logits(values):
    z = torch.tensor(values, dtype=torch.float32)

    p = stable_softmax(z)

    assert torch.isfinite(p).all(), f"softmax({values}) is not finite: {p}"
    assert abs(p.sum().item() - 1.0) < 1e-5, f"softmax({values}) sums to {p.sum().item()}"
    expected = torch.softmax(z.double(), dim=-1)
    assert torch.allclose(p.double(), expected, atol=1e-6)


# --------------------------------------------------------------------------- attention

SHAPES = [
    # (batch dims, T_q, T_k, d_k, d_v)
    ((1, 1), 1, 1, 4, 4),          # T = 1
    ((2, 3), 5, 5, 8, 8),          # odd T, batch > 1, several heads
    ((4, 2), 16, 16, 16, 16),
    ((3,), 7, 7, 4, 6),            # 3-D input, d_v != d_k
    ((2, 2), 3, 9, 8, 8),          # T_q != T_k
]


@pytest.mark.parametrize("batch,T_q,T_k,d_k,d_v", SHAPES)
def test_unmasked_attention_matches_torch(batch, T_q, T_k, d_k, d_v):
    q = randn(*batch, T_q, d_k, seed=3)
    k = randn(*batch, T_k, d_k, seed=4)
    v = randn(*batch, T_k, d_v, seed=5)

    out = scaled_dot_product_attention(q, k, v)

    expected = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, T_q, d_v), f"output shape {tuple(out.shape)}"
    assert torch.allclose(out, expected, atol=1e-5), "unmasked attention differs from PyTorch's"


@pytest.mark.parametrize("batch,T,d_k", [((1, 1), 1, 4), ((2, 3), 5, 8), ((4, 2), 16, 16), ((3,), 7, 4)])
def test_causal_attention_matches_torch_is_causal(batch, T, d_k):
    q, k, v = randn(*batch, T, d_k, seed=6), randn(*batch, T, d_k, seed=7), randn(*batch, T, d_k, seed=8)

    out = scaled_dot_product_attention(q, k, v, causal=True)

    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(out, expected, atol=1e-5), "causal attention differs from PyTorch's is_causal"


def test_causal_attention_does_not_look_at_future_tokens():
    B, h, T, d = 2, 2, 6, 4
    q, k, v = randn(B, h, T, d, seed=9), randn(B, h, T, d, seed=10), randn(B, h, T, d, seed=11)
    k2, v2 = k.clone(), v.clone()
    k2[..., 3:, :] += 10.0                      # change only the keys/values of tokens 3..5
    v2[..., 3:, :] -= 10.0

    out = scaled_dot_product_attention(q, k, v, causal=True)
    out2 = scaled_dot_product_attention(q, k2, v2, causal=True)

    assert torch.equal(out[..., :3, :], out2[..., :3, :]), \
        "queries 0..2 changed when only tokens 3..5 changed: the future leaks into the past"
    assert not torch.allclose(out[..., 3:, :], out2[..., 3:, :]), "queries 3..5 should see the change"


@pytest.mark.parametrize("batch,T_q,T_k,d_k,d_v", SHAPES[1:])
@pytest.mark.parametrize("causal", [False, True])
def test_boolean_mask_matches_torch_with_the_mask_inverted(batch, T_q, T_k, d_k, d_v, causal):
    q = randn(*batch, T_q, d_k, seed=12)
    k = randn(*batch, T_k, d_k, seed=13)
    v = randn(*batch, T_k, d_v, seed=14)
    g = torch.Generator().manual_seed(15)
    mask = torch.rand(*batch, T_q, T_k, generator=g) < 0.4          # True = blocked
    mask[..., 0] = False                                            # every query keeps key 0

    out = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)

    blocked = mask | causal_blocked(T_q, T_k) if causal else mask
    expected = torch_attention(q, k, v, blocked)
    assert torch.allclose(out, expected, atol=1e-5), \
        "masked attention differs from PyTorch's (remember: our True = blocked, its True = allowed)"


def test_a_key_padding_mask_broadcasts_over_queries_and_heads():
    B, h, T, d = 3, 2, 5, 8
    q, k, v = randn(B, h, T, d, seed=16), randn(B, h, T, d, seed=17), randn(B, h, T, d, seed=18)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    mask = padding[:, None, None, :]                                # (B, 1, 1, T_k)

    out = scaled_dot_product_attention(q, k, v, mask=mask)

    expected = torch_attention(q, k, v, mask.expand(B, h, T, T))
    assert torch.allclose(out, expected, atol=1e-5), "a (B, 1, 1, T) key mask must broadcast"


@pytest.mark.parametrize("causal", [False, True])
def test_a_query_with_every_key_blocked_gets_exactly_zero(causal):
    B, h, T, d = 2, 3, 6, 8
    q, k, v = randn(B, h, T, d, seed=19), randn(B, h, T, d, seed=20), randn(B, h, T, d, seed=21)
    mask = torch.zeros(B, 1, T, T, dtype=torch.bool)
    mask[0, :, 2, :] = True                        # query 2 of batch 0 sees nothing
    mask[1, :, :, 0] = True                        # with causal=True, query 0 of batch 1 sees nothing
    mask[1, :, 4, :] = True

    out = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)

    blocked = (mask | causal_blocked(T, T)) if causal else mask
    fully_blocked = blocked.expand(B, h, T, T).all(dim=-1)        # (B, h, T)
    assert torch.isfinite(out).all(), "fully blocked queries must not produce NaN or inf"
    assert torch.equal(out[fully_blocked], torch.zeros_like(out[fully_blocked])), \
        "a query with every key blocked must get a zero output"
    expected = torch_attention(q, k, v, blocked)                  # NaN on the fully blocked rows
    ok = ~fully_blocked
    assert torch.allclose(out[ok], expected[ok], atol=1e-5), "the other queries must match PyTorch"


@pytest.mark.parametrize("dtype,atol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_attention_with_fully_blocked_rows_is_finite_and_accurate(dtype, atol, causal):
    B, h, T, d = 2, 2, 7, 16
    q = (randn(B, h, T, d, seed=22) * 2).to(dtype)
    k = (randn(B, h, T, d, seed=23) * 2).to(dtype)
    v = randn(B, h, T, d, seed=24).to(dtype)
    g = torch.Generator().manual_seed(25)
    mask = torch.rand(B, 1, T, T, generator=g) < 0.3
    mask[:, :, :, 0] = False
    mask[0, :, 3, :] = True                        # a fully blocked query in each batch element
    mask[1, :, 6, :] = True

    out = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)

    blocked = (mask | causal_blocked(T, T)) if causal else mask
    assert out.dtype == dtype, f"attention must keep the input dtype {dtype}, got {out.dtype}"
    assert torch.isfinite(out).all(), f"{dtype} attention with blocked rows gave NaN/inf"
    assert (out[0, :, 3] == 0).all() and (out[1, :, 6] == 0).all(), "fully blocked rows must be 0"
    expected = float64_attention(q, k, v, blocked)
    err = (out.double() - expected).abs().max().item()
    assert err < atol, f"{dtype} attention is {err:.3g} away from float64 (allowed {atol})"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_attention_with_large_scores_stays_finite(dtype):
    # scores around +-300: exp without the max shift, or a -1e9 fill, overflows in half precision
    T, d = 5, 4
    q = torch.full((1, T, d), 15.0, dtype=dtype)
    k = torch.linspace(-20, 20, T * d).reshape(1, T, d).to(dtype)
    v = randn(1, T, d, seed=26).to(dtype)

    out = scaled_dot_product_attention(q, k, v, causal=True)

    assert torch.isfinite(out).all(), f"large {dtype} scores gave NaN/inf: {out}"
    expected = float64_attention(q, k, v, causal_blocked(T, T))
    assert torch.allclose(out.double(), expected, atol=3e-2)


def test_a_non_boolean_mask_is_rejected_with_a_value_error():
    q = randn(1, 3, 4, seed=27)

    with pytest.raises(ValueError, match="mask"):
        scaled_dot_product_attention(q, q, q, mask=torch.zeros(3, 3))


# --------------------------------------------------------------------------- split / merge heads

def test_split_heads_shape_and_merge_heads_shape():
    x = randn(2, 5, 12, seed=28)

    heads = split_heads(x, 3)
    merged = merge_heads(heads)

    assert heads.shape == (2, 3, 5, 4), f"split_heads (2, 5, 12), h=3 -> {tuple(heads.shape)}"
    assert merged.shape == (2, 5, 12), f"merge_heads (2, 3, 5, 4) -> {tuple(merged.shape)}"


@pytest.mark.parametrize("B,T,d_model,h", [(2, 5, 12, 3), (1, 1, 8, 8), (3, 7, 16, 1), (2, 4, 32, 4)])
def test_head_i_owns_features_i_times_d_k_to_i_plus_one_times_d_k(B, T, d_model, h):
    x = randn(B, T, d_model, seed=29)
    d_k = d_model // h

    heads = split_heads(x, h)

    for i in range(h):
        assert torch.equal(heads[:, i], x[..., i * d_k:(i + 1) * d_k]), \
            f"head {i} must be features [{i * d_k}, {(i + 1) * d_k}) (view(B, T, h, d_k), then transpose)"


@pytest.mark.parametrize("B,T,d_model,h", [(2, 5, 12, 3), (1, 1, 8, 8), (3, 7, 16, 1)])
def test_split_and_merge_heads_are_inverses(B, T, d_model, h):
    x = randn(B, T, d_model, seed=30)
    y = randn(B, h, T, d_model // h, seed=31)

    assert torch.equal(merge_heads(split_heads(x, h)), x), "merge_heads(split_heads(x)) must be x"
    assert torch.equal(split_heads(merge_heads(y), h), y), "split_heads(merge_heads(y)) must be y"


def test_split_heads_rejects_a_head_count_that_does_not_divide_d_model():
    x = randn(2, 5, 12, seed=32)

    with pytest.raises(ValueError, match="n_head"):
        split_heads(x, 5)


@pytest.mark.parametrize("d_model,n_head", [(10, 3), (12, 5), (7, 2)])
def test_multi_head_attention_rejects_a_head_count_that_does_not_divide_d_model(d_model, n_head):
    with pytest.raises(ValueError, match="n_head"):
        MultiHeadAttention(d_model, n_head)


# --------------------------------------------------------------------------- MultiHeadAttention

def paired_attention(d_model, n_head, bias, seed=0):
    """Our MultiHeadAttention and nn.MultiheadAttention(batch_first=True) with the same weights."""
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_model, n_head, bias=bias)
    theirs = nn.MultiheadAttention(d_model, n_head, bias=bias, batch_first=True)
    with torch.no_grad():
        if bias:   # nn.Linear initialises biases uniformly, so they are non-zero here
            for lin in (ours.w_q, ours.w_k, ours.w_v, ours.w_o):
                lin.bias.normal_()
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        if bias:
            theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
            theirs.out_proj.bias.copy_(ours.w_o.bias)
    return ours.eval(), theirs.eval()


MHA_CASES = [(1, 1, 8, 2), (2, 5, 12, 3), (3, 7, 16, 4), (2, 16, 32, 8), (1, 4, 8, 1)]


@pytest.mark.parametrize("B,T,d_model,n_head", MHA_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_causal_multi_head_attention_matches_torch(B, T, d_model, n_head, bias):
    ours, theirs = paired_attention(d_model, n_head, bias)
    x = randn(B, T, d_model, seed=33)

    out = ours(x, causal=True)

    # nn.MultiheadAttention's bool attn_mask is True = not allowed, like ours
    expected, _ = theirs(x, x, x, attn_mask=causal_blocked(T, T), need_weights=False)
    assert out.shape == (B, T, d_model)
    assert torch.allclose(out, expected, atol=1e-5), \
        "causal MultiHeadAttention differs from nn.MultiheadAttention with the same weights"


@pytest.mark.parametrize("B,T,d_model,n_head", MHA_CASES)
def test_non_causal_multi_head_attention_matches_torch(B, T, d_model, n_head):
    ours, theirs = paired_attention(d_model, n_head, bias=True, seed=1)
    x = randn(B, T, d_model, seed=34)

    out = ours(x, causal=False)

    expected, _ = theirs(x, x, x, need_weights=False)
    assert torch.allclose(out, expected, atol=1e-5), "non-causal MultiHeadAttention differs"


@pytest.mark.parametrize("causal", [False, True])
def test_padding_mask_matches_torch_key_padding_mask(causal):
    B, T, d_model, n_head = 3, 6, 16, 4
    ours, theirs = paired_attention(d_model, n_head, bias=True, seed=2)
    x = randn(B, T, d_model, seed=35)
    padding = torch.tensor([[False] * 6,                    # no padding
                            [False] * 4 + [True] * 2,       # right padding
                            [False] * 5 + [True]])

    out = ours(x, causal=causal, padding_mask=padding)

    attn_mask = causal_blocked(T, T) if causal else None
    expected, _ = theirs(x, x, x, key_padding_mask=padding, attn_mask=attn_mask, need_weights=False)
    assert torch.allclose(out, expected, atol=1e-5), \
        "padding_mask (True = that key is padding) must act like key_padding_mask"


@pytest.mark.parametrize("bias", [True, False])
def test_a_query_whose_keys_are_all_padding_gets_zero_attention(bias):
    # batch 0: left padding, so with causal=True query 0 can only see key 0, which is padding;
    # batch 1: the whole sequence is padding, every query is fully blocked
    B, T, d_model, n_head = 3, 5, 8, 2
    ours, theirs = paired_attention(d_model, n_head, bias=bias, seed=3)
    x = randn(B, T, d_model, seed=36)
    padding = torch.tensor([[True, False, False, False, False],
                            [True] * 5,
                            [False] * 4 + [True]])
    fully_blocked = torch.zeros(B, T, dtype=torch.bool)
    fully_blocked[0, 0] = True
    fully_blocked[1, :] = True

    out = ours(x, causal=True, padding_mask=padding)

    # zero attention output, then W_o: the result is W_o's bias (exactly zero without bias)
    zero_then_proj = ours.w_o.bias.detach() if bias else torch.zeros(d_model)
    assert torch.isfinite(out).all(), "a fully padded query must not give NaN"
    assert torch.equal(out[fully_blocked], zero_then_proj.expand(int(fully_blocked.sum()), d_model)), \
        "a query whose every key is padding must get a zero attention output"
    expected, _ = theirs(x, x, x, key_padding_mask=padding, attn_mask=causal_blocked(T, T),
                         need_weights=False)                # NaN where fully blocked
    ok = ~fully_blocked
    assert torch.allclose(out[ok], expected[ok], atol=1e-5), "the other queries must match PyTorch"


def test_padding_mask_of_the_wrong_shape_is_rejected():
    mha = MultiHeadAttention(8, 2)
    x = randn(2, 5, 8, seed=37)

    with pytest.raises(ValueError, match="padding_mask"):
        mha(x, padding_mask=torch.zeros(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("dtype,atol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)])
def test_multi_head_attention_runs_in_half_precision(dtype, atol):
    B, T, d_model, n_head = 2, 5, 16, 4
    ours, theirs = paired_attention(d_model, n_head, bias=True, seed=4)
    x = randn(B, T, d_model, seed=38)
    padding = torch.tensor([[True, False, False, False, False], [False] * 5])
    half = MultiHeadAttention(d_model, n_head).to(dtype)
    half.load_state_dict(ours.state_dict())

    out = half(x.to(dtype), causal=True, padding_mask=padding)

    assert out.dtype == dtype
    assert torch.isfinite(out).all(), f"{dtype} MultiHeadAttention gave NaN/inf"
    expected, _ = theirs(x, x, x, key_padding_mask=padding, attn_mask=causal_blocked(T, T),
                         need_weights=False)
    ok = torch.ones(B, T, dtype=torch.bool)
    ok[0, 0] = False
    err = (out[ok].float() - expected[ok]).abs().max().item()
    assert err < atol, f"{dtype} MultiHeadAttention is {err:.3g} away from float32"


def test_multi_head_attention_has_the_four_named_projections():
    mha = MultiHeadAttention(12, 3, bias=False)

    for name in ("w_q", "w_k", "w_v", "w_o"):
        lin = getattr(mha, name)
        assert isinstance(lin, nn.Linear), f"{name} must be an nn.Linear"
        assert lin.weight.shape == (12, 12), f"{name}.weight must be (d_model, d_model)"
        assert lin.bias is None, f"{name} must have no bias when bias=False"
