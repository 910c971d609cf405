# -*- coding: latin-1 -*-
# positions: sinus et cosinus, à la Vaswani
"""Day 48 solution: sinusoidal positions and rotary position embedding (RoPE)."""
import torch
from torch import Tensor


def sinusoidal_positions(T: int, d: int) -> Tensor:
    if d <= 0 or d % 2:
        raise ValueError(f"d must be a positive even number, got d={d}")
    p = torch.arange(T, dtype=torch.float32)[:, None]                 # (T, 1)
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)   # (d/2,)
    angle = p * freq                                                   # (T, d/2)
    pe = torch.zeros(T, d)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


def apply_rope(x: Tensor, positions: Tensor | None = None, theta: float = 10000.0) -> Tensor:
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"the last dimension d of x must be even, got d={d}")
    if positions is None:
        positions = torch.arange(T)
    freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)    # (d/2,)
    angle = positions.to(torch.float32)[:, None] * freq                # (T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]                                # each pair (x0, x1)
    rotated = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    return rotated.flatten(-2)                                         # interleave back
