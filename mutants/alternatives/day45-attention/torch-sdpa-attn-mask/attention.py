"""Correct, delegating to torch.nn.functional.scaled_dot_product_attention: its boolean attn_mask
is True where attention is ALLOWED, so the contract's blocked-mask is inverted first; causal and
padding are combined into that one mask (is_causal cannot be combined with attn_mask)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def stable_softmax(z, dim=-1):
    out = torch.softmax(z, dim=dim)
    return torch.where(torch.isneginf(z).all(dim=dim, keepdim=True), torch.zeros_like(out), out)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be bool, True = blocked")
    T_q, T_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(T_q, T_k, dtype=torch.bool)
    if causal:
        allowed = allowed.tril()
    if mask is not None:
        allowed = allowed & ~mask
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], allowed.shape[:-2])
    q, k, v = (t.expand(*lead, *t.shape[-2:]) for t in (q, k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


def split_heads(x, n_head):
    B, T, C = x.shape
    if n_head <= 0 or C % n_head:
        raise ValueError("n_head must divide d_model")
    return x.unflatten(-1, (n_head, C // n_head)).transpose(1, 2)


def merge_heads(x):
    return x.transpose(1, 2).flatten(-2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if n_head <= 0 or d_model % n_head:
            raise ValueError("n_head must divide d_model")
        self.n_head = n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q, k, v = (split_heads(w(x), self.n_head) for w in (self.w_q, self.w_k, self.w_v))
        mask = None if padding_mask is None else padding_mask[:, None, None, :]
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)))
