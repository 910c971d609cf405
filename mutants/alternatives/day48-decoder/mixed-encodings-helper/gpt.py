"""The solution's GPT with GPTConfig imported from a helper module; the other files carry a BOM
(attention.py), CRLF endings (norms.py) and a latin-1 PEP 263 line (positions.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from _config import GPTConfig
from attention import MultiHeadAttention
from norms import LayerNorm


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        d_ff = config.d_ff or 4 * config.d_model
        self.fc = nn.Linear(config.d_model, d_ff, bias=config.bias)
        self.proj = nn.Linear(d_ff, config.d_model, bias=config.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
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
    return sum(p.numel() for p in model.parameters())         # parameters() yields a tied matrix once
