"""Day 48: a decoder-only GPT (days 46-48 put together).

Fill in every method and function marked `raise NotImplementedError`. GPTConfig is given.
Keep the attribute names below exactly: the grader loads its own weights into your modules by
these names before comparing them with its reference (your initialisation is not graded).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from attention import MultiHeadAttention   # your attention.py (a relative import works too)
from norms import LayerNorm                # your norms.py


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int
    d_model: int
    n_layer: int
    n_head: int
    d_ff: int | None = None        # None means 4 * d_model
    bias: bool = False             # bias of every nn.Linear; LayerNorms always have weight and bias
    tie_weights: bool = True


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        """self.fc = nn.Linear(d_model, d_ff), self.proj = nn.Linear(d_ff, d_model), both with
        bias=config.bias; d_ff = config.d_ff, or 4 * d_model when it is None."""
        super().__init__()
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model): proj(GELU(fc(x))) with the EXACT (erf) GELU,
        not the tanh approximation."""
        raise NotImplementedError


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        """self.ln_1 = LayerNorm(d_model), self.attn = MultiHeadAttention(d_model, n_head,
        bias=config.bias), self.ln_2 = LayerNorm(d_model), self.mlp = MLP(config)."""
        super().__init__()
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, T, d_model), Pre-LN with clean residual paths:
            x = x + attn(ln_1(x), causal=True)
            x = x + mlp(ln_2(x))
        """
        raise NotImplementedError


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        """Keep self.config = config and create:
            self.wte = nn.Embedding(vocab_size, d_model)      token embedding
            self.wpe = nn.Embedding(block_size, d_model)      learned position embedding
            self.blocks = nn.ModuleList of n_layer Blocks
            self.ln_f = LayerNorm(d_model)                    final LayerNorm
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        With config.tie_weights, lm_head.weight IS wte.weight: one Parameter read by both ends
        (assign the Parameter; copying values is not tying). A small init such as N(0, 0.02)
        keeps the first loss near ln(vocab_size).
        """
        super().__init__()
        raise NotImplementedError

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) int64 token ids -> (logits, loss).

        Raise ValueError (naming T and block_size) if T > block_size.
        x = wte(idx) + wpe(arange(T)) -> every block in order -> ln_f -> lm_head: logits (B, T, V).
        loss = F.cross_entropy over (B*T, V) logits vs (B*T,) targets when targets is given,
        else None.
        """
        raise NotImplementedError


def count_parameters(model: nn.Module) -> int:
    """The number of parameters of `model`, each Parameter counted once (a tied matrix once)."""
    raise NotImplementedError
