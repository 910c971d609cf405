import math
import torch


def sinusoidal_positions(T, d):
    if d <= 0 or d % 2 == 1:
        raise ValueError(f"sinusoidal_positions needs an even d, got d={d}")
    i = torch.arange(d // 2, dtype=torch.float32)
    inv = 1.0 / torch.pow(torch.tensor(10000.0), 2 * i / d)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.stack([ang.sin(), ang.cos()], dim=-1).reshape(T, d)


def apply_rope(x, positions=None, theta=10000.0):
    T, d = x.shape[-2:]
    if d % 2:
        raise ValueError(f"d={d} must be even")
    p = torch.arange(T) if positions is None else positions
    inv = theta ** (-torch.arange(0, d, 2).float() / d)
    ang = p.float()[:, None] * inv                                   # (T, d/2)
    cos = ang.cos().repeat_interleave(2, dim=-1)                     # (T, d): c0 c0 c1 c1 ...
    sin = ang.sin().repeat_interleave(2, dim=-1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    rot = torch.stack((-x1, x0), dim=-1).flatten(-2)                 # (-x1, x0) per pair
    return x * cos + rot * sin
