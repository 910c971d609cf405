"""Correct, written like nanoGPT's CausalSelfAttention: a registered lower-triangular `bias` buffer
sliced to the sequence, masked_fill(... == 0, float('-inf')), F.softmax, attention inlined in forward."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

MAX_POSITIONS = 1024  # like GPT-2's n_positions


def stable_softmax(z, dim=-1):
    z = z - z.max(dim=dim, keepdim=True).values.clamp(min=torch.finfo(z.dtype).min)
    att = F.softmax(z, dim=dim)
    return att.masked_fill(torch.isnan(att), 0.0)   # an all -inf slice: 0/0 -> 0


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be a bool tensor")
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if causal:
        T_q, T_k = att.shape[-2:]
        tril = torch.tril(torch.ones(T_q, T_k))
        att = att.masked_fill(tril == 0, float("-inf"))
    if mask is not None:
        att = att.masked_fill(mask, float("-inf"))
    return stable_softmax(att, dim=-1) @ v


def split_heads(x, n_head):
    B, T, C = x.size()
    if C % n_head != 0:
        raise ValueError("n_head must divide d_model")
    return x.view(B, T, n_head, C // n_head).transpose(1, 2)


def merge_heads(x):
    B, nh, T, hs = x.size()
    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head != 0:
            raise ValueError(f"d_model {d_model} not divisible by n_head {n_head}")
        self.n_head = n_head
        self.n_embd = d_model
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(MAX_POSITIONS, MAX_POSITIONS))
                             .view(1, 1, MAX_POSITIONS, MAX_POSITIONS))

    def forward(self, x, causal=True, padding_mask=None):
        B, T, C = x.size()
        q = self.w_q(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = self.w_k(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if causal:
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if padding_mask is not None:
            att = att.masked_fill(padding_mask[:, None, None, :], float("-inf"))
        att = stable_softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.w_o(y)
