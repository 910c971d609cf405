"""A decoder-only GPT (day 48): token + learned position embeddings, Pre-LN blocks, tied head."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from reference_model.attention import MultiHeadAttention
from reference_model.norms import LayerNorm


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
        d_ff = config.d_ff if config.d_ff is not None else 4 * config.d_model
        self.fc = nn.Linear(config.d_model, d_ff, bias=config.bias)
        self.proj = nn.Linear(d_ff, config.d_model, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))       # exact (erf) GELU, not the tanh approximation


class Block(nn.Module):
    """Pre-LN: normalise the input of each sublayer and keep the residual path clean."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.d_model)
        self.attn = MultiHeadAttention(config.d_model, config.n_head, bias=config.bias)
        self.ln_2 = LayerNorm(config.d_model)
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
        self.ln_f = LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight  # one Parameter, read by both ends
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # GPT-2's N(0, 0.02) keeps the first logits near zero, so the first loss is near ln(V)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"idx has T={T} tokens but block_size is {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)                              # (B, T, d)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))                            # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss


def count_parameters(model: nn.Module) -> int:
    """Unique parameters: model.parameters() yields a tied matrix once."""
    return sum(p.numel() for p in model.parameters())
