import math
import torch


def sinusoidal_positions(T, d):
    if d % 2 != 0:
        raise ValueError(f"d must be even, got {d}")
    position = torch.arange(0, T).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * -(math.log(10000.0) / d))   # Annotated Transformer
    pe = torch.zeros(T, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def apply_rope(x, positions=None, theta=10000.0):
    *lead, T, d = x.shape
    if d % 2:
        raise ValueError("d must be even")
    if positions is None:
        positions = torch.arange(T)
    freqs = 1.0 / (theta ** (torch.arange(0, d, 2)[: d // 2].float() / d))   # LLaMA style
    angles = torch.outer(positions.float(), freqs)
    cis = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.float().reshape(*lead, T, d // 2, 2).contiguous())
    return torch.view_as_real(xc * cis).flatten(-2).type_as(x)
