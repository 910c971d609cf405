"""Sinusoids interleaved by stack + flatten; RoPE in GPT-J's rotate_every_two form."""
import torch


def sinusoidal_positions(T, d):
    if d % 2 or d <= 0:
        raise ValueError("d must be even")
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    angles = torch.outer(torch.arange(T).float(), inv_freq)             # (T, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # sin, cos, sin, cos ...


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(x, positions=None, theta=10000.0):
    T, d = x.shape[-2:]
    if d % 2:
        raise ValueError("rotary dimension must be even")
    if positions is None:
        positions = torch.arange(T)
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2).float() / d))
    sinusoid = torch.einsum("i,j->ij", positions.float(), inv_freq)       # (T, d/2)
    sin = sinusoid.sin().repeat_interleave(2, dim=-1).to(x.dtype)
    cos = sinusoid.cos().repeat_interleave(2, dim=-1).to(x.dtype)
    return x * cos + rotate_every_two(x) * sin
