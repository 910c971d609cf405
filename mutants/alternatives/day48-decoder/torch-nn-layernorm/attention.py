"""Correct, as a CS336 (Stanford, language modeling from scratch) student writes it without einops
or jaxtyping: softmax by hand, torch.einsum with explicit letters, torch.where on a keep-mask,
heads by reshape + einsum-transposes, annotations in comments."""
import math

import torch
from torch import Tensor, nn


def stable_softmax(z: Tensor, dim: int = -1) -> Tensor:
    # subtract the max for stability; an all -inf slice would give -inf - -inf = nan
    z_max = torch.max(z, dim=dim, keepdim=True).values
    z_max = torch.where(torch.isfinite(z_max), z_max, torch.zeros_like(z_max))
    exp_z = torch.exp(z - z_max)
    denom = torch.sum(exp_z, dim=dim, keepdim=True)
    return torch.where(denom > 0, exp_z / torch.where(denom > 0, denom, 1), 0.0).to(z.dtype)


def scaled_dot_product_attention(
    q: Tensor,  # Float[Tensor, "... queries d_k"]
    k: Tensor,  # Float[Tensor, "... keys d_k"]
    v: Tensor,  # Float[Tensor, "... keys d_v"]
    mask: Tensor | None = None,  # Bool[Tensor, "... queries keys"], True = blocked
    causal: bool = False,
) -> Tensor:
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be boolean")
    d_k = q.shape[-1]
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(d_k)
    n_q, n_k = scores.shape[-2], scores.shape[-1]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    if causal:
        keep = torch.arange(n_k)[None, :] <= torch.arange(n_q)[:, None]
    if mask is not None:
        keep = keep & ~mask
    scores = torch.where(keep, scores, float("-inf"))
    probs = stable_softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", probs, v)


def split_heads(x: Tensor, n_head: int) -> Tensor:
    batch, seq, d_model = x.shape
    if n_head <= 0 or d_model % n_head:
        raise ValueError(f"num_heads={n_head} does not divide d_model={d_model}")
    return torch.einsum("bshd->bhsd", x.reshape(batch, seq, n_head, d_model // n_head))


def merge_heads(x: Tensor) -> Tensor:
    batch, n_head, seq, d_head = x.shape
    return torch.einsum("bhsd->bshd", x).reshape(batch, seq, n_head * d_head)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if n_head <= 0 or d_model % n_head:
            raise ValueError(f"num_heads={n_head} does not divide d_model={d_model}")
        self.d_model, self.num_heads = d_model, n_head
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, causal: bool = True, padding_mask: Tensor | None = None) -> Tensor:
        Q = split_heads(self.w_q(x), self.num_heads)
        K = split_heads(self.w_k(x), self.num_heads)
        V = split_heads(self.w_v(x), self.num_heads)
        mask = None
        if padding_mask is not None:
            mask = padding_mask[:, None, None, :]  # (batch, 1, 1, keys)
        out = scaled_dot_product_attention(Q, K, V, mask=mask, causal=causal)
        return self.w_o(merge_heads(out))
