"""A GPT built from torch.nn's own LayerNorm and GELU modules (their weight/bias names match
the exercise's), and count_parameters over unique tensors by id."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from attention import MultiHeadAttention


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
        super().__init__()
        d_ff = config.d_ff or 4 * config.d_model
        self.fc = nn.Linear(config.d_model, d_ff, bias=config.bias)
        self.act = nn.GELU()
        self.proj = nn.Linear(d_ff, config.d_model, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = MultiHeadAttention(config.d_model, config.n_head, bias=config.bias)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x), causal=True)
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: Tensor, targets: Tensor | None = None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"idx has T={T} tokens, more than block_size={self.config.block_size}")
        x = self.wte(idx) + self.wpe(torch.arange(T))          # (B, T, d)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))                    # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss


def count_parameters(model: nn.Module) -> int:
    unique = {id(p): p for _, p in model.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for p in unique.values())
