"""RoPE as LLaMA's model.py computes it: precompute_freqs_cis with torch.polar, the pairs
(x[2i], x[2i+1]) viewed as complex numbers and multiplied."""
import torch


def precompute_freqs_cis(dim: int, positions: torch.Tensor, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = torch.outer(positions.float(), freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rope(x, positions=None, theta=10000.0):
    T, d = x.shape[-2], x.shape[-1]
    if d % 2 != 0:
        raise ValueError("head dimension must be even for RoPE")
    if positions is None:
        positions = torch.arange(T)
    freqs_cis = precompute_freqs_cis(d, positions, theta)
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    x_out = torch.view_as_real(x_ * freqs_cis).flatten(-2)
    return x_out.type_as(x)


def sinusoidal_positions(T, d):
    if d % 2 != 0:
        raise ValueError("d must be even")
    pe = torch.view_as_real(precompute_freqs_cis(d, torch.arange(T)))   # (T, d/2, 2) = (cos, sin)
    return pe.flip(-1).flatten(-2)                                       # sin, cos interleaved
