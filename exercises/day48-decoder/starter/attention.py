"""Day 48 (carried over from day 45): scaled dot-product attention and multi-head attention.

Your GPT's blocks use MultiHeadAttention from this file; paste in your day-45 solution or write
it again. Fill in every function and method marked `raise NotImplementedError`. Masks are boolean
and True where attention is BLOCKED (as in `scores.masked_fill(mask, ...)`). d_k = d_model // n_head.
Your code must work on CPU in float32, and attention must also work in float16 and bfloat16.
"""
import math

import torch
import torch.nn as nn
from torch import Tensor


def stable_softmax(z: Tensor, dim: int = -1) -> Tensor:
    """softmax(z - max(z)) along `dim`, returned in the same dtype as z.

    - Finite for large logits such as [500.0, 502.0] (subtract the max before exp).
    - A slice whose entries are all -inf (every key blocked) returns all zeros, never NaN.
    """
    raise NotImplementedError


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                                 causal: bool = False) -> Tensor:
    """q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (..., T_q, d_v).

    scores = q @ k^T / sqrt(d_k). `mask` is bool, broadcastable to (..., T_q, T_k), True = blocked.
    causal=True also blocks key j > query i. A query whose keys are all blocked gets a zero output.
    In float16/bfloat16 no masking constant may overflow (no -1e9 in half precision).
    """
    raise NotImplementedError


def split_heads(x: Tensor, n_head: int) -> Tensor:
    """(B, T, d_model) -> (B, n_head, T, d_k); head i uses features [i*d_k, (i+1)*d_k)."""
    raise NotImplementedError


def merge_heads(x: Tensor) -> Tensor:
    """(B, n_head, T, d_k) -> (B, T, n_head * d_k), the inverse of split_heads."""
    raise NotImplementedError


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        """Raise ValueError (naming the argument) unless d_model % n_head == 0.

        Create self.w_q, self.w_k, self.w_v, self.w_o = nn.Linear(d_model, d_model, bias=bias).
        """
        super().__init__()
        raise NotImplementedError

    def forward(self, x: Tensor, causal: bool = True, padding_mask: Tensor | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model).

        padding_mask: (B, T) bool, True where that KEY position is padding (no query attends to it).
        """
        raise NotImplementedError
