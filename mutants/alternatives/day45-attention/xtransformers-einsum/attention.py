"""Correct, in the way of lucidrains' x-transformers (without einops): einsum over '... i d, ... j d',
a keep-mask (True = may attend), the most negative finite value of the dtype as the fill, and a
fully blocked query zeroed after the softmax."""
import torch
import torch.nn.functional as F
from torch import einsum, nn


def exists(val):
    return val is not None


def max_neg_value(t):
    return -torch.finfo(t.dtype).max


def stable_softmax(z, dim=-1):
    z = z - z.amax(dim=dim, keepdim=True).detach().nan_to_num(nan=0.0, neginf=0.0)
    z = z.exp()
    return z / z.sum(dim=dim, keepdim=True).clamp(min=torch.finfo(z.dtype).tiny)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if exists(mask) and mask.dtype != torch.bool:
        raise ValueError("mask must be boolean")
    scale = q.shape[-1] ** -0.5
    sim = einsum("... i d, ... j d -> ... i j", q, k) * scale
    i, j = sim.shape[-2:]
    keep = torch.ones(i, j, dtype=torch.bool)
    if causal:
        keep = ~torch.ones(i, j, dtype=torch.bool).triu(1)
    if exists(mask):
        keep = keep & ~mask
    sim = sim.masked_fill(~keep, max_neg_value(sim))
    attn = sim.softmax(dim=-1)
    attn = attn * keep.any(dim=-1, keepdim=True)   # a query with no key left attends to nothing
    return einsum("... i j, ... j d -> ... i d", attn, v)


def split_heads(x, n_head):
    b, n, hd = x.shape
    if hd % n_head:
        raise ValueError(f"dimension {hd} must be divisible by heads {n_head}")
    return x.reshape(b, n, n_head, hd // n_head).transpose(1, 2)


def merge_heads(x):
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head:
            raise ValueError("heads must divide dim")
        self.heads = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q, k, v = (split_heads(t, self.heads) for t in (self.w_q(x), self.w_k(x), self.w_v(x)))
        mask = padding_mask[:, None, None, :] if exists(padding_mask) else None
        out = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)
        return self.w_o(merge_heads(out))
