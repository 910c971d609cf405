"""reference_model norms, positions, GPT and data against independent implementations (days 46-49).

Expected values come from torch.nn.LayerNorm / RMSNorm, complex-number rotations, math.sin/cos,
Hugging Face's GPT2LMHeadModel (built from a config, never downloaded) and F.cross_entropy.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from reference_model.data import get_batch, lm_loss, make_xy
from reference_model.gpt import GPT, GPTConfig, count_parameters
from reference_model.norms import LayerNorm, RMSNorm
from reference_model.positions import apply_rope, sinusoidal_positions


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


# --------------------------------------------------------------------------- norms

@pytest.mark.parametrize("shape", [(7,), (2, 5, 16), (3, 4, 5, 8)])
@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_layernorm_matches_torch_layernorm(shape, eps):
    d = shape[-1]
    ours, theirs = LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
    with torch.no_grad():
        theirs.weight.copy_(randn(d, seed=1))
        theirs.bias.copy_(randn(d, seed=2))
        ours.weight.copy_(theirs.weight)
        ours.bias.copy_(theirs.bias)
    x = randn(*shape, seed=3) * 3 + 1

    y = ours(x)

    assert torch.allclose(y, theirs(x), atol=1e-5), \
        "LayerNorm differs from nn.LayerNorm (biased variance, eps inside the sqrt, last dim)"


def test_layernorm_without_bias_matches_torch_layernorm_without_bias():
    ours, theirs = LayerNorm(16, bias=False), nn.LayerNorm(16, bias=False)
    with torch.no_grad():
        theirs.weight.copy_(randn(16, seed=4))
        ours.weight.copy_(theirs.weight)
    x = randn(3, 16, seed=5)

    assert ours.bias is None, "LayerNorm(bias=False) must have .bias = None"
    assert torch.allclose(ours(x), theirs(x), atol=1e-5)


def test_norm_parameters_start_as_gain_one_and_bias_zero():
    ln, rms = LayerNorm(6), RMSNorm(6)

    assert torch.equal(ln.weight, torch.ones(6)) and torch.equal(ln.bias, torch.zeros(6))
    assert torch.equal(rms.weight, torch.ones(6))
    assert [n for n, _ in rms.named_parameters()] == ["weight"], "RMSNorm has a gain and no bias"


@pytest.mark.parametrize("shape", [(7,), (2, 5, 16), (3, 4, 5, 8)])
@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_rmsnorm_matches_torch_rmsnorm(shape, eps):
    d = shape[-1]
    ours, theirs = RMSNorm(d, eps=eps), nn.RMSNorm(d, eps=eps)
    with torch.no_grad():
        theirs.weight.copy_(randn(d, seed=6))
        ours.weight.copy_(theirs.weight)
    x = randn(*shape, seed=7) * 3 + 1          # non-zero mean: subtracting it would be caught

    y = ours(x)

    assert torch.allclose(y, theirs(x), atol=1e-5), \
        "RMSNorm differs from nn.RMSNorm (x / sqrt(mean(x^2) + eps) * weight, no mean subtraction)"


def test_layernorm_and_rmsnorm_of_the_review_vector():
    x = torch.tensor([4.0, 0.0, -2.0, 2.0])

    ln = LayerNorm(4, eps=0.0)(x)
    rms = RMSNorm(4, eps=0.0)(x)

    expected_ln = torch.tensor([1.3416, -0.4472, -1.3416, 0.4472])    # mean 1, var 5
    expected_rms = torch.tensor([1.6330, 0.0, -0.8165, 0.8165])      # mean(x^2) = 6
    assert torch.allclose(ln, expected_ln, atol=5e-4), f"LayerNorm([4, 0, -2, 2]) = {ln}"
    assert torch.allclose(rms, expected_rms, atol=5e-4), f"RMSNorm([4, 0, -2, 2]) = {rms}"


# --------------------------------------------------------------------------- positions

@pytest.mark.parametrize("T,d", [(1, 2), (8, 16), (50, 32)])
def test_sinusoidal_positions_follow_the_formula(T, d):
    pe = sinusoidal_positions(T, d)

    assert pe.shape == (T, d), f"sinusoidal_positions({T}, {d}) has shape {tuple(pe.shape)}"
    for p in sorted({0, min(1, T - 1), T // 2, T - 1}):
        for i in sorted({0, min(1, d // 2 - 1), d // 4, d // 2 - 1}):
            angle = p / 10000 ** (2 * i / d)
            assert abs(pe[p, 2 * i].item() - math.sin(angle)) < 1e-6, f"PE[{p}, {2 * i}] must be sin"
            assert abs(pe[p, 2 * i + 1].item() - math.cos(angle)) < 1e-6, \
                f"PE[{p}, {2 * i + 1}] must be cos"


def test_sinusoidal_position_zero_alternates_zero_and_one():
    pe = sinusoidal_positions(3, 8)

    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 4)), f"PE[0] = {pe[0]}"


def test_sinusoidal_positions_reject_an_odd_dimension():
    with pytest.raises(ValueError, match="d"):
        sinusoidal_positions(4, 5)


def rope_via_complex(x, positions, theta=10000.0):
    """Pairs (x[2i], x[2i+1]) as complex numbers x[2i] + i x[2i+1], multiplied by e^{i a}."""
    d = x.size(-1)
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)          # (d/2,)
    angles = positions.to(torch.float64)[:, None] * freqs                       # (T, d/2)
    rotation = torch.polar(torch.ones_like(angles), angles)                     # e^{i a}
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotation).reshape(x.shape)


@pytest.mark.parametrize("shape", [(5, 8), (2, 7, 16), (2, 3, 4, 32), (1, 1, 2)])
def test_apply_rope_matches_a_complex_number_rotation(shape):
    x = randn(*shape, seed=8, dtype=torch.float64)
    T = shape[-2]

    out = apply_rope(x)

    expected = rope_via_complex(x, torch.arange(T))
    assert out.shape == x.shape
    assert torch.allclose(out, expected, atol=1e-10), "RoPE differs from the complex rotation"


def test_apply_rope_with_explicit_positions_and_theta():
    x = randn(2, 4, 6, 8, seed=9, dtype=torch.float64)
    positions = torch.tensor([3, 0, 17, 100, 5, 5])

    out = apply_rope(x, positions=positions, theta=500.0)

    assert torch.allclose(out, rope_via_complex(x, positions, theta=500.0), atol=1e-10)


def test_apply_rope_in_float32_matches_float64():
    x = randn(3, 9, 16, seed=10)

    out = apply_rope(x)

    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), rope_via_complex(x, torch.arange(9)), atol=1e-5)


def test_apply_rope_keeps_norms_and_leaves_position_zero_unchanged():
    x = randn(6, 8, seed=11, dtype=torch.float64)

    out = apply_rope(x)

    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1)), "a rotation must keep each vector's norm"
    assert torch.allclose(out[0], x[0]), "position 0 is a rotation by angle 0"


def test_rope_dot_products_depend_only_on_the_relative_offset():
    d = 16
    q, k = randn(1, d, seed=12, dtype=torch.float64), randn(1, d, seed=13, dtype=torch.float64)

    def score(p_q, p_k):
        rq = apply_rope(q, positions=torch.tensor([p_q]))
        rk = apply_rope(k, positions=torch.tensor([p_k]))
        return (rq * rk).sum().item()

    for offset in (0, 1, 3, 10):
        scores = [score(p + offset, p) for p in (0, 5, 42, 300)]
        assert max(scores) - min(scores) < 1e-9, \
            f"<rope(q, p + {offset}), rope(k, p)> must not depend on p, got {scores}"
    assert abs(score(3, 0) - score(0, 3)) > 1e-6, "offsets +3 and -3 should give different scores"


def test_apply_rope_rejects_an_odd_dimension():
    with pytest.raises(ValueError):
        apply_rope(randn(4, 5, seed=14))


# --------------------------------------------------------------------------- GPT vs Hugging Face GPT-2

def paired_gpt(tie, V=97, block_size=16, d=32, n_layer=2, n_head=4, seed=0):
    """Our GPT (bias=True) and GPT2LMHeadModel with identical, randomised weights."""
    from transformers import GPT2Config, GPT2LMHeadModel

    hf_config = GPT2Config(vocab_size=V, n_positions=block_size, n_embd=d, n_layer=n_layer,
                           n_head=n_head, n_inner=None, activation_function="gelu",
                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                           layer_norm_epsilon=1e-5, tie_word_embeddings=tie,
                           bos_token_id=None, eos_token_id=None)
    hf_config._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(hf_config).eval()
    with torch.no_grad():                      # HF starts with zero biases and unit LN gains
        for p in hf.parameters():
            p.normal_(0.0, 0.2)
    ours = GPT(GPTConfig(vocab_size=V, block_size=block_size, d_model=d, n_layer=n_layer,
                         n_head=n_head, bias=True, tie_weights=tie)).eval()
    t = hf.transformer
    with torch.no_grad():
        ours.wte.weight.copy_(t.wte.weight)
        ours.wpe.weight.copy_(t.wpe.weight)
        for block, h in zip(ours.blocks, t.h):
            # HF Conv1D computes x @ W + b, so W is nn.Linear's weight transposed
            w_q, w_k, w_v = h.attn.c_attn.weight.split(d, dim=1)
            b_q, b_k, b_v = h.attn.c_attn.bias.split(d)
            for lin, w, b in ((block.attn.w_q, w_q, b_q), (block.attn.w_k, w_k, b_k),
                              (block.attn.w_v, w_v, b_v),
                              (block.attn.w_o, h.attn.c_proj.weight, h.attn.c_proj.bias),
                              (block.mlp.fc, h.mlp.c_fc.weight, h.mlp.c_fc.bias),
                              (block.mlp.proj, h.mlp.c_proj.weight, h.mlp.c_proj.bias)):
                lin.weight.copy_(w.T)
                lin.bias.copy_(b)
            for ours_ln, hf_ln in ((block.ln_1, h.ln_1), (block.ln_2, h.ln_2)):
                ours_ln.weight.copy_(hf_ln.weight)
                ours_ln.bias.copy_(hf_ln.bias)
        ours.ln_f.weight.copy_(t.ln_f.weight)
        ours.ln_f.bias.copy_(t.ln_f.bias)
        if not tie:
            ours.lm_head.weight.copy_(hf.lm_head.weight)
    return ours, hf


@pytest.fixture(scope="module")
def tied_pair():
    return paired_gpt(tie=True)


@pytest.mark.parametrize("B,T", [(1, 1), (2, 7), (3, 16)])
def test_gpt_logits_match_hugging_face_gpt2(tied_pair, B, T):
    ours, hf = tied_pair
    g = torch.Generator().manual_seed(B * 100 + T)
    idx = torch.randint(97, (B, T), generator=g)

    with torch.no_grad():
        logits, loss = ours(idx)
        expected = hf(idx).logits

    assert loss is None, "without targets the loss must be None"
    assert logits.shape == (B, T, 97), f"logits shape {tuple(logits.shape)}, expected {(B, T, 97)}"
    err = (logits - expected).abs().max().item()
    assert err < 1e-5, f"logits differ from GPT2LMHeadModel by {err:.3g} (Pre-LN, exact GELU, tied head)"


def test_untied_gpt_logits_match_hugging_face_gpt2():
    ours, hf = paired_gpt(tie=False, V=50, n_layer=3, seed=1)
    idx = torch.randint(50, (2, 12), generator=torch.Generator().manual_seed(2))

    with torch.no_grad():
        logits, _ = ours(idx)
        expected = hf(idx).logits

    err = (logits - expected).abs().max().item()
    assert err < 1e-5, f"untied logits differ from GPT2LMHeadModel by {err:.3g}"


@pytest.mark.parametrize("tie", [True, False])
def test_count_parameters_equals_hugging_face_unique_parameter_count(tie):
    ours, hf = paired_gpt(tie=tie, seed=3)

    expected = sum(p.numel() for p in hf.parameters())      # parameters() yields a tied matrix once

    assert count_parameters(ours) == expected, \
        f"count_parameters = {count_parameters(ours)}, GPT2LMHeadModel has {expected} (tie={tie})"


def test_loss_is_cross_entropy_of_the_flattened_logits(tied_pair):
    ours, hf = tied_pair
    g = torch.Generator().manual_seed(4)
    idx, targets = torch.randint(97, (3, 10), generator=g), torch.randint(97, (3, 10), generator=g)

    with torch.no_grad():
        _, loss = ours(idx, targets)
        hf_logits = hf(idx).logits

    expected = F.cross_entropy(hf_logits.reshape(-1, 97), targets.reshape(-1))
    assert loss.dim() == 0, "the loss must be a scalar"
    assert abs(loss.item() - expected.item()) < 1e-5, f"loss {loss.item()} vs {expected.item()}"


def toy_config(**overrides):
    kwargs = dict(vocab_size=100, block_size=16, d_model=32, n_layer=2, n_head=4)
    kwargs.update(overrides)
    return GPTConfig(**kwargs)


def test_tied_head_is_the_token_embedding_parameter():
    torch.manual_seed(0)
    model = GPT(toy_config())

    assert model.lm_head.weight is model.wte.weight, "with tie_weights, lm_head.weight IS wte.weight"
    params = list(model.parameters())
    assert sum(p is model.wte.weight for p in params) == 1, "the tied matrix must be one Parameter"


def test_untied_head_has_its_own_parameter():
    torch.manual_seed(0)
    tied, untied = GPT(toy_config()), GPT(toy_config(tie_weights=False))

    assert untied.lm_head.weight is not untied.wte.weight
    assert untied.lm_head.weight.data_ptr() != untied.wte.weight.data_ptr()
    assert count_parameters(untied) - count_parameters(tied) == 100 * 32, \
        "an untied head adds V * d_model parameters"


def test_gpt_without_bias_has_no_linear_biases_but_layernorms_keep_theirs():
    model = GPT(toy_config(bias=False))

    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears and all(m.bias is None for m in linears), "bias=False: no nn.Linear has a bias"
    assert all(m.bias is not None for m in model.modules() if isinstance(m, LayerNorm)), \
        "LayerNorms always have weight and bias"


def test_d_ff_defaults_to_four_times_d_model_and_can_be_set():
    default, custom = GPT(toy_config()), GPT(toy_config(d_ff=48))

    assert default.blocks[0].mlp.fc.weight.shape == (128, 32)
    assert custom.blocks[0].mlp.fc.weight.shape == (48, 32)
    assert custom.blocks[0].mlp.proj.weight.shape == (32, 48)


def test_gpt_rejects_more_tokens_than_block_size():
    model = GPT(toy_config())
    idx = torch.zeros(2, 17, dtype=torch.long)

    with pytest.raises(ValueError, match="block_size"):
        model(idx)


def test_gpt_logits_do_not_depend_on_future_tokens():
    torch.manual_seed(0)
    model = GPT(toy_config()).eval()
    idx = torch.randint(100, (2, 10), generator=torch.Generator().manual_seed(5))
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 100

    with torch.no_grad():
        a, _ = model(idx)
        b, _ = model(changed)

    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6), "positions 0..5 must not see tokens 6..9"
    assert not torch.allclose(a[:, 6:], b[:, 6:]), "positions 6..9 should change"


def test_gpt_uses_learned_positions():
    torch.manual_seed(0)
    model = GPT(toy_config()).eval()
    idx = torch.full((1, 4), 7)

    with torch.no_grad():
        logits, _ = model(idx)

    assert model.wpe.weight.shape == (16, 32), "wpe is an Embedding(block_size, d_model)"
    assert not torch.allclose(logits[0, 1], logits[0, 2]), \
        "the same token at different positions must get different logits"


# --------------------------------------------------------------------------- data

def test_make_xy_shifts_the_chunk_by_one():
    x, y = make_xy([502, 1204, 33, 991, 88])

    assert x.tolist() == [502, 1204, 33, 991], f"x = {x.tolist()}"
    assert y.tolist() == [1204, 33, 991, 88], f"y = {y.tolist()}"
    assert x.dtype == torch.int64 and y.dtype == torch.int64, "x and y must be int64"


@pytest.mark.parametrize("chunk", [np.array([5, 6, 7, 8], dtype=np.uint16),
                                   torch.tensor([5, 6, 7, 8], dtype=torch.int32)])
def test_make_xy_accepts_numpy_and_tensor_chunks(chunk):
    x, y = make_xy(chunk)

    assert x.tolist() == [5, 6, 7] and y.tolist() == [6, 7, 8]
    assert x.dtype == torch.int64 and y.dtype == torch.int64


def test_get_batch_shapes_dtypes_and_shift():
    data = np.arange(1000, 1100, dtype=np.uint16)       # the value tells the position

    x, y = get_batch(data, batch_size=8, block_size=5, generator=torch.Generator().manual_seed(0))

    assert x.shape == (8, 5) and y.shape == (8, 5), f"shapes {tuple(x.shape)}, {tuple(y.shape)}"
    assert x.dtype == torch.int64 and y.dtype == torch.int64, f"dtypes {x.dtype}, {y.dtype}"
    assert x.device.type == "cpu" and y.device.type == "cpu"
    assert torch.equal(y, x + 1), "y must be x shifted by one token"
    assert torch.equal(x, x[:, :1] + torch.arange(5)), "each row must be a contiguous window"


def test_get_batch_windows_stay_inside_data_and_reach_the_last_start():
    block_size = 6
    data = torch.arange(block_size + 2)                  # valid starts: 0 and 1
    g = torch.Generator().manual_seed(1)

    starts = set()
    for _ in range(50):
        x, y = get_batch(data, batch_size=4, block_size=block_size, generator=g)
        assert int(y.max()) <= len(data) - 1, "a window ran off the end of data"
        starts.update(x[:, 0].tolist())

    assert starts == {0, 1}, f"starts seen {sorted(starts)}; the last valid start is 1"


def test_get_batch_draws_every_valid_start_roughly_equally():
    block_size, n_starts = 4, 6
    data = np.arange(block_size + n_starts)

    x, _ = get_batch(data, batch_size=6000, block_size=block_size,
                     generator=torch.Generator().manual_seed(2))

    counts = torch.bincount(x[:, 0], minlength=n_starts)
    assert len(counts) == n_starts, f"a start beyond the last valid one was drawn: {counts.tolist()}"
    assert counts.min() > 800 and counts.max() < 1200, f"starts are not uniform: {counts.tolist()}"


def test_get_batch_is_reproducible_with_a_seeded_generator():
    data = np.arange(500)

    a = get_batch(data, 4, 8, generator=torch.Generator().manual_seed(42))
    b = get_batch(data, 4, 8, generator=torch.Generator().manual_seed(42))

    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), "same seed must give the same batch"


def test_get_batch_gives_the_same_batch_for_numpy_and_tensor_data():
    values = np.arange(300, dtype=np.int32) * 7

    from_numpy = get_batch(values, 5, 10, generator=torch.Generator().manual_seed(3))
    from_tensor = get_batch(torch.from_numpy(values), 5, 10, generator=torch.Generator().manual_seed(3))

    assert torch.equal(from_numpy[0], from_tensor[0]) and torch.equal(from_numpy[1], from_tensor[1])
    assert from_tensor[0].dtype == torch.int64, "int32 data must still give int64 batches"


def test_get_batch_accepts_data_of_exactly_block_size_plus_one():
    x, y = get_batch(np.arange(9), 3, 8, generator=torch.Generator().manual_seed(0))

    assert torch.equal(x, torch.arange(8).expand(3, 8)) and torch.equal(y, torch.arange(1, 9).expand(3, 8))


def test_get_batch_rejects_data_shorter_than_block_size_plus_one():
    with pytest.raises(ValueError, match="block_size"):
        get_batch(np.arange(8), 2, 8)


@pytest.mark.parametrize("B,T,V", [(1, 1, 5), (4, 8, 11), (2, 16, 100)])
def test_lm_loss_is_flattened_cross_entropy(B, T, V):
    logits = randn(B, T, V, seed=B + T + V) * 3
    targets = torch.randint(V, (B, T), generator=torch.Generator().manual_seed(V))

    loss = lm_loss(logits, targets)

    expected = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    assert loss.dim() == 0 and abs(loss.item() - expected.item()) < 1e-6, \
        f"lm_loss = {loss.item()}, F.cross_entropy over (B*T, V) = {expected.item()}"


def test_lm_loss_of_uniform_logits_is_ln_v():
    logits, targets = torch.zeros(2, 3, 100), torch.randint(100, (2, 3))

    assert abs(lm_loss(logits, targets).item() - math.log(100)) < 1e-5
