"""Sinusoidal positions and rotary position embedding (day 47)."""
import torch
from torch import Tensor


def sinusoidal_positions(T: int, d: int) -> Tensor:
    """(T, d): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
    if d <= 0 or d % 2 != 0:
        raise ValueError(f"d must be a positive even number, got d={d}")
    if T < 0:
        raise ValueError(f"T must be >= 0, got T={T}")
    p = torch.arange(T, dtype=torch.float64)[:, None]                  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]        # (1, d/2)
    angle = p / torch.pow(10000.0, two_i / d)                          # (T, d/2)
    pe = torch.empty(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)                                     # even features: sin
    pe[:, 1::2] = torch.cos(angle)                                     # odd features: cos
    return pe.to(torch.float32)


def apply_rope(x: Tensor, positions: Tensor | None = None, theta: float = 10000.0) -> Tensor:
    """Rotate each pair (x[..., 2i], x[..., 2i+1]) by a = p * theta^(-2i/d).

    x (..., T, d) with d even; positions (T,) integers, default arange(T).
    (x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)
    """
    T, d = x.size(-2), x.size(-1)
    if d % 2 != 0:
        raise ValueError(f"the last dimension of x must be even, got d={d}")
    if positions is None:
        positions = torch.arange(T, device=x.device)
    if positions.shape != (T,):
        raise ValueError(f"positions must have shape ({T},), got {tuple(positions.shape)}")
    two_i = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)           # (d/2,)
    angle = positions.to(torch.float64)[:, None] * theta ** (-two_i / d)           # (T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]                                            # (..., T, d/2)
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out
