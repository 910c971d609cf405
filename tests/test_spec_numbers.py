"""Every number in SPEC.md's answer key that a model or a function can produce, reproduced by
building the real reference modules and calling them.

Test names carry the SPEC answer ids (e.g. `gpt2_small_attn_total`) so a failure points at the
row of the answer key it contradicts. Large models are built on the meta device: parameters
have shapes but no storage, which is all count_parameters needs.
"""
import math

import numpy as np
import pytest
import torch

from reference_model.attention import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
    stable_softmax,
)
from reference_model.data import get_batch, lm_loss, make_xy
from reference_model.gpt import GPT, GPTConfig, count_parameters
from reference_model.norms import LayerNorm, RMSNorm


def attention_counts(d_model, n_head, bias):
    """(matrix weights, biases, total) of a MultiHeadAttention, built without memory."""
    with torch.device("meta"):
        mha = MultiHeadAttention(d_model, n_head, bias=bias)
    weights = sum(p.numel() for p in mha.parameters() if p.dim() == 2)
    biases = sum(p.numel() for p in mha.parameters() if p.dim() == 1)
    return weights, biases, count_parameters(mha)


def identity_attention(d_model, n_head):
    mha = MultiHeadAttention(d_model, n_head, bias=False)
    with torch.no_grad():
        for lin in (mha.w_q, mha.w_k, mha.w_v, mha.w_o):
            lin.weight.copy_(torch.eye(d_model))
    return mha


def attention_weights(q, k, causal):
    """The softmax weights, read out by attending over the identity matrix as values."""
    return scaled_dot_product_attention(q, k, torch.eye(k.size(-2)), causal=causal)


def toy_config(**overrides):
    # SPEC toy_*: V = 100, block 16, d_model 32, n_layer 2, n_head 4, d_ff 128, bias False, tied
    kwargs = dict(vocab_size=100, block_size=16, d_model=32, n_layer=2, n_head=4, d_ff=128,
                  bias=False, tie_weights=True)
    kwargs.update(overrides)
    return GPTConfig(**kwargs)


def assert_close(actual, expected, tol, what):
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    err = (actual - expected).abs().max().item()
    assert err <= tol, f"{what}: got {actual.tolist()}, SPEC says {expected.tolist()} (tol {tol})"


# --------------------------------------------------------------------------- day45-quiz

def test_d4_h2_d_k_and_params():
    assert 4 // 2 == split_heads(torch.zeros(1, 1, 4), 2).size(-1) == 2, "d4_h2_d_k"
    assert attention_counts(4, 2, bias=False)[2] == 64, "d4_h2_params_no_bias"
    assert attention_counts(4, 2, bias=True)[2] == 80, "d4_h2_params_bias"


def test_gpt2_small_attention_counts():
    weights, biases, total = attention_counts(768, 12, bias=True)

    assert split_heads(torch.zeros(1, 1, 768), 12).size(-1) == 64, "gpt2_small_d_k"
    assert weights == 2_359_296, f"gpt2_small_attn_weights: {weights:,}"
    assert biases == 3_072, f"gpt2_small_attn_biases: {biases:,}"
    assert total == 2_362_368, f"gpt2_small_attn_total: {total:,}"


def test_medium_attention_counts():
    no_bias = attention_counts(1024, 16, bias=False)[2]
    with_bias = attention_counts(1024, 16, bias=True)[2]

    assert no_bias == 4_194_304, f"medium_attn_no_bias: {no_bias:,}"
    assert with_bias == 4_198_400, f"medium_attn_bias: {with_bias:,}"


def test_trace_weights_and_output():
    # X = [[1,0,1,0],[0,2,0,1]], d_model 4, h 2, identity projections, causal
    X = torch.tensor([[[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0]]])
    mha = identity_attention(4, 2)

    heads = split_heads(X, 2)                          # identity W_Q, W_K: q = k = X, per head
    weights = attention_weights(heads, heads, causal=True)[0]
    with torch.no_grad():
        out = mha(X, causal=True)[0]

    assert_close(weights[0], [[1, 0], [0.0558, 0.9442]], 5e-4, "trace_head0_weights")
    assert_close(weights[1], [[1, 0], [0.3302, 0.6698]], 5e-4, "trace_head1_weights")
    assert_close(out, [[1, 0, 1, 0], [0.0558, 1.8884, 0.3302, 0.6698]], 5e-4, "trace_output")


def test_exp_overflow_thresholds():
    fp32_z = math.log(torch.finfo(torch.float32).max)
    fp16_z = math.log(torch.finfo(torch.float16).max)

    assert abs(fp32_z - 88.7) <= 0.05, f"fp32_exp_overflow_z: ln(finfo.max) = {fp32_z}"
    assert abs(fp16_z - 11.1) <= 0.05, f"fp16_exp_overflow_z: ln(65504) = {fp16_z}"
    assert torch.isfinite(torch.exp(torch.tensor(88.7))) and torch.isinf(torch.exp(torch.tensor(88.8)))
    assert torch.isfinite(torch.exp(torch.tensor(11.0, dtype=torch.float16)))
    assert torch.isinf(torch.exp(torch.tensor(11.2, dtype=torch.float16)))


def test_fp16_exp_15_is_inf():
    assert torch.exp(torch.tensor(15.0, dtype=torch.float16)).item() == math.inf, "fp16_exp_15"


def test_softmax_500_502():
    p = stable_softmax(torch.tensor([500.0, 502.0]))

    assert_close(p, [0.1192, 0.8808], 5e-4, "softmax_500_502")


# --------------------------------------------------------------------------- day48-quiz

def test_logits_shape_b1_t3_d4_v6():
    model = GPT(GPTConfig(vocab_size=6, block_size=3, d_model=4, n_layer=1, n_head=2))

    logits, _ = model(torch.zeros(1, 3, dtype=torch.long))

    assert list(logits.shape) == [1, 3, 6], f"logits_shape_b1_t3_d4_v6: {list(logits.shape)}"


@pytest.mark.parametrize("answer_id,V,d_model,expected", [
    ("gpt2_tying_savings", 50257, 768, 38_597_376),
    ("tying_savings_v32000_d4096", 32000, 4096, 131_072_000),
])
def test_tying_savings(answer_id, V, d_model, expected):
    # n_layer = 0: the blocks are the same in both models and do not change the difference
    with torch.device("meta"):
        tied = GPT(GPTConfig(vocab_size=V, block_size=8, d_model=d_model, n_layer=0, n_head=1))
        untied = GPT(GPTConfig(vocab_size=V, block_size=8, d_model=d_model, n_layer=0, n_head=1,
                               tie_weights=False))

    savings = count_parameters(untied) - count_parameters(tied)

    assert savings == expected == V * d_model, f"{answer_id}: {savings:,}"


def test_gpt2_small_tying_savings_with_all_twelve_blocks():
    def gpt2_small(tie):
        return GPT(GPTConfig(vocab_size=50257, block_size=1024, d_model=768, n_layer=12, n_head=12,
                             bias=True, tie_weights=tie))

    with torch.device("meta"):
        tied, untied = gpt2_small(True), gpt2_small(False)

    assert count_parameters(untied) - count_parameters(tied) == 38_597_376, "gpt2_tying_savings"


# --------------------------------------------------------------------------- day49-quiz

def test_xy_x_and_xy_y():
    x, y = make_xy([502, 1204, 33, 991, 88])

    assert x.tolist() == [502, 1204, 33, 991], "xy_x"
    assert y.tolist() == [1204, 33, 991, 88], "xy_y"


def test_batch_bytes():
    # the seed's question: B = 64, T = 1024; x and y together (each 65,536 tokens * 8 bytes)
    x, y = get_batch(np.arange(2000), batch_size=64, block_size=1024,
                     generator=torch.Generator().manual_seed(0))

    int64_bytes = x.nbytes + y.nbytes
    int32_bytes = x.to(torch.int32).nbytes + y.to(torch.int32).nbytes

    assert x.nbytes == 524_288, f"one int64 (64, 1024) tensor is 524,288 bytes, got {x.nbytes:,}"
    assert int64_bytes == 1_048_576, f"batch_bytes_int64: {int64_bytes:,}"
    assert int32_bytes == 524_288, f"batch_bytes_int32: {int32_bytes:,}"


@pytest.mark.parametrize("answer_id,V,expected", [
    ("first_loss (day49-bughunt)", 100, 4.6052),
    ("first_loss_v50257", 50257, 10.8249),
])
def test_first_loss_of_a_fresh_gpt_is_ln_v(answer_id, V, expected):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, block_size=16, d_model=32, n_layer=2 if V == 100 else 1,
                          n_head=4))
    g = torch.Generator().manual_seed(1)
    idx, targets = torch.randint(V, (4, 16), generator=g), torch.randint(V, (4, 16), generator=g)

    with torch.no_grad():
        logits, loss = model(idx, targets)

    assert abs(math.log(V) - expected) <= 5e-4, f"{answer_id}: ln({V}) = {math.log(V)}"
    assert abs(loss.item() - expected) < 0.1, \
        f"{answer_id}: a fresh GPT's first loss is {loss.item():.4f}, expected about ln({V})"
    assert abs(lm_loss(logits, targets).item() - loss.item()) < 1e-6


def test_review_scores_weights_and_outputs():
    # Q = [[1,1],[0,2]], K = [[1,1],[2,0]], V = [[1,0],[0,1]], d_k = 2
    Q = torch.tensor([[1.0, 1.0], [0.0, 2.0]])
    K = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    V = torch.tensor([[1.0, 0.0], [0.0, 1.0]])

    scores = Q @ K.T / math.sqrt(2)
    weights = attention_weights(Q, K, causal=True)
    out = scaled_dot_product_attention(Q, K, V, causal=True)
    out_unmasked = scaled_dot_product_attention(Q, K, V)

    assert_close(scores, [[1.4142, 1.4142], [1.4142, 0]], 5e-4, "review_scores")
    assert_close(weights, [[1, 0], [0.8044, 0.1956]], 5e-4, "review_weights")
    masked = scores.masked_fill(torch.tensor([[False, True], [False, False]]), float("-inf"))
    assert_close(stable_softmax(masked), weights, 1e-6, "review_weights via stable_softmax")
    assert_close(out, [[1, 0], [0.8044, 0.1956]], 5e-4, "review_out")
    assert_close(out_unmasked[0], [0.5, 0.5], 5e-4, "review_out0_unmasked")


def test_shapes_quiz():
    # B = 2, T = 5, d_model = 12, h = 3
    mha = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)

    q = split_heads(mha.w_q(x), 3)
    k = split_heads(mha.w_k(x), 3)
    scores = q @ k.transpose(-2, -1)
    concat = merge_heads(scaled_dot_product_attention(q, k, split_heads(mha.w_v(x), 3), causal=True))

    assert q.size(-1) == 4, "shapes_d_k"
    assert list(q.shape) == [2, 3, 5, 4], f"shapes_q_heads: {list(q.shape)}"
    assert list(scores.shape) == [2, 3, 5, 5], f"shapes_scores: {list(scores.shape)}"
    assert list(concat.shape) == [2, 5, 12], f"shapes_concat: {list(concat.shape)}"
    assert list(mha(x).shape) == [2, 5, 12]


def test_params_d12():
    assert attention_counts(12, 3, bias=False)[2] == 576, "params_d12_no_bias"
    assert attention_counts(12, 3, bias=True)[2] == 624, "params_d12_bias"


def test_layernorm_x_and_rmsnorm_x():
    x = torch.tensor([4.0, 0.0, -2.0, 2.0])

    with torch.no_grad():
        assert_close(LayerNorm(4, eps=0.0)(x), [1.3416, -0.4472, -1.3416, 0.4472], 5e-4, "layernorm_x")
        assert_close(RMSNorm(4, eps=0.0)(x), [1.6330, 0, -0.8165, 0.8165], 5e-4, "rmsnorm_x")


@pytest.fixture(scope="module")
def toy_gpt():
    torch.manual_seed(0)
    return GPT(toy_config())


def test_toy_parameter_ledger(toy_gpt):
    block = count_parameters(toy_gpt.blocks[0])
    blocks = count_parameters(toy_gpt.blocks)
    embeddings = count_parameters(toy_gpt.wte) + count_parameters(toy_gpt.wpe)
    final_ln = count_parameters(toy_gpt.ln_f)
    total = count_parameters(toy_gpt)

    assert block == 12_416, f"toy_block_params: {block:,}"
    assert blocks == 24_832, f"toy_blocks_params: {blocks:,}"
    assert embeddings == 3_712, f"toy_embedding_params: {embeddings:,}"
    assert final_ln == 64, f"toy_final_ln_params: {final_ln:,}"
    assert total == 28_608 == blocks + embeddings + final_ln, \
        f"toy_total_params: {total:,} (the tied head adds nothing)"


def test_toy_untied_extra(toy_gpt):
    untied = GPT(toy_config(tie_weights=False))

    extra = count_parameters(untied) - count_parameters(toy_gpt)

    assert extra == 3_200, f"toy_untied_extra: {extra:,}"


def test_toy_ffn_fraction(toy_gpt):
    # share of the FFN in each block's matrix weights (LayerNorm vectors are not matrices)
    block = toy_gpt.blocks[0]
    matrices = sum(p.numel() for p in block.parameters() if p.dim() == 2)
    ffn = sum(p.numel() for p in block.mlp.parameters() if p.dim() == 2)

    assert abs(ffn / matrices - 0.6667) <= 5e-3, f"toy_ffn_fraction: {ffn} / {matrices}"


def test_toy_logits_shape(toy_gpt):
    idx = torch.randint(100, (8, 16))

    with torch.no_grad():
        logits, _ = toy_gpt(idx)

    assert list(logits.shape) == [8, 16, 100], f"toy_logits_shape: {list(logits.shape)}"
