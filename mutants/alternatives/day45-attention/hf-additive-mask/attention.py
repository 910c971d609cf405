"""Correct, in Hugging Face's eager-attention manner: the boolean mask becomes an ADDITIVE float bias
of torch.finfo(dtype).min, the softmax runs in float32 and is cast back, and a query with every key
blocked is zeroed (its additive bias alone would give it uniform weights)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def stable_softmax(z, dim=-1):
    probs = F.softmax(z, dim=dim, dtype=torch.float32)
    dead = torch.isneginf(z).all(dim=dim, keepdim=True)
    return probs.masked_fill(dead, 0.0).to(z.dtype)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("expected a boolean mask (True = masked out)")
    query_length, key_length = q.shape[-2], k.shape[-2]
    blocked = torch.zeros(query_length, key_length, dtype=torch.bool)
    if causal:
        blocked = torch.ones(query_length, key_length, dtype=torch.bool).triu(diagonal=1)
    if mask is not None:
        blocked = blocked | mask
    attn_weights = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    min_value = torch.finfo(attn_weights.dtype).min
    attention_bias = torch.zeros(blocked.shape, dtype=attn_weights.dtype).masked_fill(blocked, min_value)
    attn_weights = attn_weights + attention_bias
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    attn_weights = attn_weights.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)
    return torch.matmul(attn_weights, v)


def split_heads(x, n_head):
    bsz, q_len, hidden_size = x.shape
    if n_head <= 0 or hidden_size % n_head:
        raise ValueError(f"hidden_size={hidden_size} must be divisible by n_head={n_head}")
    return x.view(bsz, q_len, n_head, hidden_size // n_head).transpose(1, 2)


def merge_heads(x):
    bsz, n_head, q_len, head_dim = x.shape
    return x.transpose(1, 2).contiguous().reshape(bsz, q_len, n_head * head_dim)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if n_head <= 0 or d_model % n_head:
            raise ValueError(f"d_model={d_model} must be divisible by n_head={n_head}")
        self.num_heads = n_head
        self.head_dim = d_model // n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        query_states = split_heads(self.w_q(x), self.num_heads)
        key_states = split_heads(self.w_k(x), self.num_heads)
        value_states = split_heads(self.w_v(x), self.num_heads)
        mask = None
        if padding_mask is not None:
            mask = padding_mask[:, None, None, :].to(torch.bool)
        attn_output = scaled_dot_product_attention(query_states, key_states, value_states, mask, causal)
        return self.w_o(merge_heads(attn_output))
