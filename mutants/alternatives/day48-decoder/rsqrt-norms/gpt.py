import math
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F
from attention import MultiHeadAttention
from norms import LayerNorm


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int
    d_model: int
    n_layer: int
    n_head: int
    d_ff: int | None = None
    bias: bool = False
    tie_weights: bool = True


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        d_ff = config.d_ff if config.d_ff is not None else 4 * config.d_model
        self.fc = nn.Linear(config.d_model, d_ff, bias=config.bias)
        self.proj = nn.Linear(d_ff, config.d_model, bias=config.bias)

    def forward(self, x):
        return self.proj(gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.d_model)
        self.attn = MultiHeadAttention(config.d_model, config.n_head, bias=config.bias)
        self.ln_2 = LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x):
        a = self.attn(self.ln_1(x), causal=True)
        x = a + x
        return self.mlp(self.ln_2(x)) + x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight

    def _init(self, m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                torch.nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"T={T} > block_size={self.config.block_size}")
        h = self.wte(idx) + self.wpe.weight[:T]
        for block in self.blocks:
            h = block(h)
        h = self.ln_f(h)
        logits = h @ self.lm_head.weight.T
        if targets is None:
            return logits, None
        logp = torch.log_softmax(logits, dim=-1)
        nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        return logits, nll.mean()


def count_parameters(model: nn.Module) -> int:
    total, seen = 0, set()
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total
