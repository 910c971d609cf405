"""Correct, in minGPT's manner: key/query/value projections computed in forward, the mask as a
float tril viewed (1, 1, T_q, T_k), softmax by hand with the max kept as a tuple's [0]."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


def stable_softmax(z, dim=-1):
    m = torch.max(z, dim, keepdim=True)[0]
    m[torch.isinf(m)] = 0.0                  # rows that are all -inf stay all -inf, no NaN
    e = torch.exp(z - m)
    s = torch.sum(e, dim, keepdim=True)
    s[s == 0] = 1.0
    return e / s


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype is not torch.bool:
        raise ValueError("attention mask must be boolean, True where blocked")
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if causal:
        keep = torch.tril(torch.ones(att.size(-2), att.size(-1), dtype=att.dtype))
        att = att.masked_fill(keep == 0, float("-inf"))
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    att = stable_softmax(att, dim=-1)
    return torch.matmul(att, v)


def split_heads(x, n_head):
    B, T, C = x.size()
    if n_head < 1 or C % n_head:
        raise ValueError("d_model % n_head != 0")
    return x.view(B, T, n_head, C // n_head).permute(0, 2, 1, 3)


def merge_heads(x):
    B, nh, T, hs = x.size()
    return x.permute(0, 2, 1, 3).reshape(B, T, nh * hs)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head != 0:
            raise ValueError("d_model must be a multiple of n_head")
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.n_head = n_head

    def forward(self, x, causal=True, padding_mask=None):
        k = split_heads(self.w_k(x), self.n_head)
        q = split_heads(self.w_q(x), self.n_head)
        v = split_heads(self.w_v(x), self.n_head)
        mask = None
        if padding_mask is not None:
            mask = padding_mask.view(x.size(0), 1, 1, x.size(1))
        y = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)
        return self.w_o(merge_heads(y))
