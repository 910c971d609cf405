"""Scaled dot-product and multi-head attention (days 43-45).

Masks are boolean and True where attention is blocked, as in `scores.masked_fill(mask, ...)`.
"""
import math

import torch
import torch.nn as nn
from torch import Tensor


def stable_softmax(z: Tensor, dim: int = -1) -> Tensor:
    """softmax(z - max z) along `dim`, in z's dtype.

    Subtracting the max changes nothing mathematically but makes every exponent <= 0, so exp
    cannot overflow (logits like [500, 502] stay finite). A slice that is entirely -inf (every key
    blocked) has no max to subtract; it returns zeros instead of NaN.
    """
    z_max = z.amax(dim=dim, keepdim=True)
    z_max = torch.where(torch.isneginf(z_max), torch.zeros_like(z_max), z_max)  # all -inf slice
    e = torch.exp(z - z_max)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                                 causal: bool = False) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) v, with blocked keys removed from the softmax.

    q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (..., T_q, d_v).
    Blocked scores are filled with -inf, which exists in every float dtype: a constant like -1e9
    overflows float16 (max 65504). A query whose keys are all blocked gets a zero output.
    """
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = blocked), got dtype {mask.dtype}")
    d_k = q.size(-1)
    T_q, T_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)                 # (..., T_q, T_k)
    blocked = torch.zeros(T_q, T_k, dtype=torch.bool, device=q.device)
    if causal:
        # key j is in the future of query i when j > i: strictly above the diagonal
        blocked = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool, device=q.device), diagonal=1)
    if mask is not None:
        blocked = blocked | mask
    scores = scores.masked_fill(blocked, float("-inf"))
    weights = stable_softmax(scores, dim=-1)
    return weights @ v


def split_heads(x: Tensor, n_head: int) -> Tensor:
    """(B, T, d_model) -> (B, n_head, T, d_k): head i owns features [i*d_k, (i+1)*d_k)."""
    B, T, d_model = x.shape
    if n_head <= 0 or d_model % n_head != 0:
        raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
    return x.view(B, T, n_head, d_model // n_head).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, n_head, T, d_k) -> (B, T, n_head * d_k), the inverse of split_heads."""
    B, n_head, T, d_k = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, n_head * d_k)


class MultiHeadAttention(nn.Module):
    """Concat(head_1, ..., head_h) W^O with head_i = Attention(x W_i^Q, x W_i^K, x W_i^V)."""

    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if n_head <= 0 or d_model % n_head != 0:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.d_model = d_model
        self.n_head = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, causal: bool = True, padding_mask: Tensor | None = None) -> Tensor:
        # x: (B, T, d_model); padding_mask: (B, T), True where that key is padding
        q = split_heads(self.w_q(x), self.n_head)                     # (B, h, T, d_k)
        k = split_heads(self.w_k(x), self.n_head)
        v = split_heads(self.w_v(x), self.n_head)
        mask = None
        if padding_mask is not None:
            if padding_mask.shape != x.shape[:2]:
                raise ValueError(f"padding_mask must have shape {tuple(x.shape[:2])}, "
                                 f"got {tuple(padding_mask.shape)}")
            mask = padding_mask[:, None, None, :]                     # (B, 1, 1, T): blocks keys
        y = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)   # (B, h, T, d_k)
        return self.w_o(merge_heads(y))                                # (B, T, d_model)
