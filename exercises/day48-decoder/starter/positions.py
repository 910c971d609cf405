"""Day 48: positions. Sinusoidal absolute positions and rotary position embedding (RoPE).

Fill in every function marked `raise NotImplementedError`.
"""
import torch
from torch import Tensor


def sinusoidal_positions(T: int, d: int) -> Tensor:
    """The (T, d) float32 table of sinusoidal positions, for positions p = 0 .. T-1.

    Features come in pairs that share one frequency, interleaved (not [all sin | all cos]):
        PE[p, 2i]     = sin(p / 10000^(2i/d))
        PE[p, 2i + 1] = cos(p / 10000^(2i/d))
    Raise ValueError (naming d) unless d is a positive even number.
    """
    raise NotImplementedError


def apply_rope(x: Tensor, positions: Tensor | None = None, theta: float = 10000.0) -> Tensor:
    """Rotary position embedding: x (..., T, d) -> a tensor of the same shape and dtype.

    d must be even. positions: (T,) integer positions of the T rows, default torch.arange(T).
    Each ADJACENT pair (x[..., 2i], x[..., 2i+1]) of the row at position p rotates by the angle
    a = p * theta^(-2i/d):
        (x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)
    Works for any number of leading dims, e.g. (T, d), (B, T, d) or (B, n_head, T, d_k).
    """
    raise NotImplementedError
