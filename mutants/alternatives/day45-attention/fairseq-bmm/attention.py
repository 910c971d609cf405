"""Correct, in fairseq's MultiheadAttention manner: q scaled by head_dim ** -0.5 before the product,
heads folded into the batch for torch.bmm, softmax computed in float32 and cast back (type_as)."""
import torch
import torch.nn.functional as F
from torch import nn


def stable_softmax(z, dim=-1):
    # fairseq's utils.softmax: F.softmax(x.float(), dim).type_as(x); an all -inf slice is 0, not NaN
    out = F.softmax(z.float(), dim=dim)
    return torch.nan_to_num(out, nan=0.0).type_as(z)


def scaled_dot_product_attention(q, k, v, mask=None, causal=False):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be torch.bool")
    *batch, tgt_len, head_dim = q.shape
    src_len = k.size(-2)
    scaling = head_dim ** -0.5
    q = q * scaling
    lead = torch.broadcast_shapes(tuple(batch), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    qf = q.expand(*lead, tgt_len, head_dim).reshape(-1, tgt_len, head_dim)
    kf = k.expand(*lead, src_len, head_dim).reshape(-1, src_len, head_dim)
    vf = v.expand(*lead, src_len, v.size(-1)).reshape(-1, src_len, v.size(-1))
    attn_weights = torch.bmm(qf, kf.transpose(1, 2)).view(*lead, tgt_len, src_len)
    if causal:
        future = torch.triu(torch.ones(tgt_len, src_len, dtype=torch.bool), 1)
        attn_weights = attn_weights.masked_fill(future, float("-inf"))
    if mask is not None:
        attn_weights = attn_weights.masked_fill(mask, float("-inf"))
    attn_probs = stable_softmax(attn_weights, dim=-1)
    attn = torch.bmm(attn_probs.reshape(-1, tgt_len, src_len), vf)
    return attn.view(*lead, tgt_len, v.size(-1))


def split_heads(x, n_head):
    bsz, tgt_len, embed_dim = x.size()
    head_dim = embed_dim // n_head if n_head > 0 else 0
    if head_dim * n_head != embed_dim:
        raise ValueError("embed_dim must be divisible by num_heads")
    return x.transpose(0, 1).contiguous().view(tgt_len, bsz, n_head, head_dim).permute(1, 2, 0, 3)


def merge_heads(x):
    bsz, n_head, tgt_len, head_dim = x.size()
    return x.permute(2, 0, 1, 3).contiguous().view(tgt_len, bsz, n_head * head_dim).transpose(0, 1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, bias=True):
        super().__init__()
        self.embed_dim = d_model
        self.num_heads = n_head
        self.head_dim = d_model // n_head if n_head > 0 else 0
        if self.head_dim * n_head != d_model:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, causal=True, padding_mask=None):
        q = split_heads(self.w_q(x), self.num_heads)
        k = split_heads(self.w_k(x), self.num_heads)
        v = split_heads(self.w_v(x), self.num_heads)
        key_padding_mask = None
        if padding_mask is not None:
            key_padding_mask = padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool)
        attn = scaled_dot_product_attention(q, k, v, mask=key_padding_mask, causal=causal)
        return self.w_o(merge_heads(attn))
