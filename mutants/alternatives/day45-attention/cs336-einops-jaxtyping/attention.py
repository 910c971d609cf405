"""Attention as CS336 assignment 1 students write it: einops for the head layout, jaxtyping
annotations, einsum for the scores."""
import math

import torch
import torch.nn as nn
from einops import einsum, rearrange
from jaxtyping import Bool, Float
from torch import Tensor


def stable_softmax(z: Float[Tensor, "..."], dim: int = -1) -> Float[Tensor, "..."]:
    shifted = z - torch.amax(z, dim=dim, keepdim=True)
    shifted = torch.nan_to_num(shifted, nan=float("-inf"))  # an all -inf slice: -inf - -inf
    e = torch.exp(shifted)
    total = torch.sum(e, dim=dim, keepdim=True)
    return e / total.clamp_min(torch.finfo(z.dtype).tiny)


def scaled_dot_product_attention(
    q: Float[Tensor, "... q d_k"],
    k: Float[Tensor, "... k d_k"],
    v: Float[Tensor, "... k d_v"],
    mask: Bool[Tensor, "..."] | None = None,
    causal: bool = False,
) -> Float[Tensor, "... q d_v"]:
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be a bool tensor")
    scores = einsum(q, k, "... q d_k, ... k d_k -> ... q k") / math.sqrt(q.shape[-1])
    if causal:
        i = torch.arange(q.shape[-2])[:, None]
        j = torch.arange(k.shape[-2])[None, :]
        scores = scores.masked_fill(j > i, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    return einsum(stable_softmax(scores, dim=-1), v, "... q k, ... k d_v -> ... q d_v")


def split_heads(x: Float[Tensor, "b t d"], n_head: int) -> Float[Tensor, "b h t d_k"]:
    if n_head <= 0 or x.shape[-1] % n_head:
        raise ValueError(f"n_head={n_head} must divide d_model={x.shape[-1]}")
    return rearrange(x, "b t (h d_k) -> b h t d_k", h=n_head)


def merge_heads(x: Float[Tensor, "b h t d_k"]) -> Float[Tensor, "b t d"]:
    return rearrange(x, "b h t d_k -> b t (h d_k)")


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if n_head <= 0 or d_model % n_head != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, x: Float[Tensor, "b t d"], causal: bool = True,
                padding_mask: Bool[Tensor, "b t"] | None = None) -> Float[Tensor, "b t d"]:
        q, k, v = (split_heads(w(x), self.n_head) for w in (self.w_q, self.w_k, self.w_v))
        mask = None if padding_mask is None else rearrange(padding_mask, "b k -> b 1 1 k")
        return self.w_o(merge_heads(scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)))
