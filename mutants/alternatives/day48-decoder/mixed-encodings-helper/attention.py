"""Day 48 solution (carried over from day 45): scaled dot-product and multi-head attention."""
import math

import torch
import torch.nn as nn
from torch import Tensor


def stable_softmax(z: Tensor, dim: int = -1) -> Tensor:
    z_max = z.amax(dim=dim, keepdim=True)
    # a slice that is all -inf has no max to subtract: use 0, and its exps are all 0
    z_max = torch.where(torch.isneginf(z_max), torch.zeros_like(z_max), z_max)
    e = torch.exp(z - z_max)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool (True = blocked), got {mask.dtype}")
    T_q, T_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    blocked = torch.zeros(T_q, T_k, dtype=torch.bool)
    if causal:
        blocked = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=1)
    if mask is not None:
        blocked = blocked | mask
    scores = scores.masked_fill(blocked, float("-inf"))  # -inf exists in every dtype; -1e9 does not
    return stable_softmax(scores, dim=-1) @ v


def split_heads(x, n_head):
    B, T, d_model = x.shape
    if n_head <= 0 or d_model % n_head:
        raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
    return x.view(B, T, n_head, d_model // n_head).transpose(1, 2)


def merge_heads(x):
    B, n_head, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, n_head * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if n_head <= 0 or d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.n_head = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q = split_heads(self.w_q(x), self.n_head)
        k = split_heads(self.w_k(x), self.n_head)
        v = split_heads(self.w_v(x), self.n_head)
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        y = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)
        return self.w_o(merge_heads(y))
