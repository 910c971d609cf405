import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def stable_softmax(z, dim=-1):
    out = torch.softmax(z, dim=dim)
    return torch.nan_to_num(out, nan=0.0)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    scores = torch.einsum("...id,...jd->...ij", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    T_q, T_k = scores.shape[-2:]
    if causal:
        scores = scores.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool).triu(1), float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = stable_softmax(scores, dim=-1)
    return torch.einsum("...ij,...jd->...id", w, v)


def split_heads(x, n_head):
    B, T, C = x.shape
    if C % n_head:
        raise ValueError("n_head must divide d_model")
    return x.reshape(B, T, n_head, C // n_head).permute(0, 2, 1, 3)


def merge_heads(x):
    B, h, T, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, T, h * d)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} not divisible by n_head={n_head}")
        self.h = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        B, T, C = x.shape
        q, k, v = (split_heads(w(x), self.h) for w in (self.w_q, self.w_k, self.w_v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal) if padding_mask is None else \
            scaled_dot_product_attention(q, k, v, mask=padding_mask[:, None, None, :], causal=causal)
        return self.w_o(merge_heads(y))
