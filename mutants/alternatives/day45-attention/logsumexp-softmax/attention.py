"""Correct: softmax as exp(z - logsumexp(z)), the log-domain form; an all -inf slice has
logsumexp -inf and is returned as zeros."""
import math

import torch
import torch.nn as nn
from torch import Tensor


def stable_softmax(z: Tensor, dim: int = -1) -> Tensor:
    lse = torch.logsumexp(z, dim=dim, keepdim=True)
    out = torch.exp(z - lse)
    return torch.where(torch.isneginf(lse), torch.zeros_like(out), out)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be bool, got {mask.dtype}")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    T_q, T_k = scores.shape[-2:]
    if causal:
        rows = torch.arange(T_q).unsqueeze(-1)
        cols = torch.arange(T_k).unsqueeze(0)
        scores = scores.masked_fill(cols > rows, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return stable_softmax(scores) @ v


def split_heads(x, n_head):
    B, T, d_model = x.shape
    if n_head <= 0 or d_model % n_head != 0:
        raise ValueError(f"cannot split d_model={d_model} into {n_head} heads")
    return x.reshape(B, T, n_head, -1).transpose(1, 2)


def merge_heads(x):
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if n_head <= 0 or d_model % n_head != 0:
            raise ValueError(f"cannot split d_model={d_model} into {n_head} heads")
        self.n_head = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q = split_heads(self.w_q(x), self.n_head)
        k = split_heads(self.w_k(x), self.n_head)
        v = split_heads(self.w_v(x), self.n_head)
        mask = padding_mask.unsqueeze(-2).unsqueeze(-3) if padding_mask is not None else None
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask, causal)))
