import math
import torch
import torch.nn as nn


def stable_softmax(z, dim=-1):
    m = z.max(dim=dim, keepdim=True).values
    m = m.masked_fill(m == float("-inf"), 0.0)
    e = (z - m).exp()
    s = e.sum(dim=dim, keepdim=True)
    return e / s.clamp_min(torch.finfo(z.dtype).tiny)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    d_k = q.size(-1)
    scores = torch.matmul(q / math.sqrt(d_k), k.transpose(-1, -2))
    neg = torch.finfo(scores.dtype).min
    T_q, T_k = scores.shape[-2:]
    block = torch.zeros(T_q, T_k, dtype=torch.bool)
    if causal:
        i = torch.arange(T_q)[:, None]
        j = torch.arange(T_k)[None, :]
        block = j > i
    if mask is not None:
        block = block | mask
    scores = scores.masked_fill(block, float("-inf"))
    return torch.matmul(stable_softmax(scores), v)


def split_heads(x, n_head):
    B, T, C = x.shape
    if C % n_head:
        raise ValueError(f"n_head={n_head} does not divide d_model={C}")
    return x.view(B, T, n_head, -1).transpose(1, 2)


def merge_heads(x):
    return x.transpose(1, 2).flatten(2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.n_head = n_head
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def forward(self, x, causal=True, padding_mask=None):
        q = split_heads(self.w_q(x), self.n_head)
        k = split_heads(self.w_k(x), self.n_head)
        v = split_heads(self.w_v(x), self.n_head)
        m = None if padding_mask is None else padding_mask[:, None, None, :]
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, m, causal)))
