"""Correct, in another style: einsum, torch.where instead of masked_fill, finfo(dtype).min fills,
torch.softmax with fully blocked rows zeroed afterwards."""
import torch
import torch.nn as nn


def stable_softmax(z, dim=-1):
    shifted = z - z.max(dim=dim, keepdim=True).values.nan_to_num(neginf=0.0)
    e = shifted.exp()
    s = e.sum(dim=dim, keepdim=True)
    return torch.where(s > 0, e / s.clamp_min(torch.finfo(z.dtype).tiny), torch.zeros_like(e))


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    d_k = q.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", q, k) * d_k ** -0.5
    T_q, T_k = scores.shape[-2:]
    blocked = torch.zeros(T_q, T_k, dtype=torch.bool)
    if causal:
        i = torch.arange(T_q)[:, None]
        j = torch.arange(T_k)[None, :]
        blocked = j > i
    if mask is not None:
        blocked = blocked | mask
    blocked = blocked.expand(scores.shape)
    lowest = torch.finfo(scores.dtype).min
    scores = torch.where(blocked, torch.full_like(scores, lowest), scores)
    weights = torch.softmax(scores.float(), dim=-1).to(scores.dtype)
    weights = torch.where(blocked.all(dim=-1, keepdim=True), torch.zeros_like(weights), weights)
    return torch.einsum("...qk,...kd->...qd", weights, v)


def split_heads(x, n_head):
    B, T, C = x.shape
    if C % n_head:
        raise ValueError(f"d_model={C} is not divisible by n_head={n_head}")
    return torch.stack(x.chunk(n_head, dim=-1), dim=1)


def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        if d_model % n_head != 0:
            raise ValueError(f"n_head ({n_head}) must divide d_model ({d_model})")
        self.h = n_head
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x, causal=True, padding_mask=None):
        q, k, v = (split_heads(w(x), self.h) for w in (self.w_q, self.w_k, self.w_v))
        mask = padding_mask.unsqueeze(1).unsqueeze(2) if padding_mask is not None else None
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask, causal)))
