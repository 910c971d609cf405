"""Correct, in another style: one head at a time, a float mask added to the scores."""
import math

import torch
from torch import nn


def stable_softmax(z, dim=-1):
    m = torch.amax(z, dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(z - m)
    denom = torch.sum(e, dim=dim, keepdim=True)
    return e / torch.where(denom == 0, torch.ones_like(denom), denom)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    scale = 1.0 / math.sqrt(q.size(-1))
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril() if causal else None
    if mask is not None:
        allowed = ~mask if allowed is None else allowed & ~mask
    if allowed is not None:
        bias = torch.zeros(allowed.shape, dtype=scores.dtype).masked_fill(~allowed, float("-inf"))
        scores = scores + bias
    return torch.matmul(stable_softmax(scores), v)


def split_heads(x, n_head):
    B, T, D = x.shape
    if D % n_head != 0:
        raise ValueError("n_head must divide d_model")
    return x.reshape(B, T, n_head, D // n_head).permute(0, 2, 1, 3)


def merge_heads(x):
    B, H, T, Dk = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, H * Dk)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if n_head < 1 or d_model % n_head != 0:
            raise ValueError(f"d_model={d_model} must be a multiple of n_head={n_head}")
        self.n_head, self.d_k = n_head, d_model // n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q, k, v = self.w_q(x), self.w_k(x), self.w_v(x)
        mask = None if padding_mask is None else padding_mask[:, None, :]      # (B, 1, T): keys
        outputs = []
        for h in range(self.n_head):
            part = slice(h * self.d_k, (h + 1) * self.d_k)
            outputs.append(scaled_dot_product_attention(q[..., part], k[..., part], v[..., part],
                                                        mask=mask, causal=causal))
        return self.w_o(torch.cat(outputs, dim=-1))
