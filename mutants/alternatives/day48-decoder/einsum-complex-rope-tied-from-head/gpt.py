from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F
from .attention import MultiHeadAttention
from .norms import LayerNorm


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


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden = 4 * config.d_model if config.d_ff is None else config.d_ff
        self.fc = nn.Linear(config.d_model, hidden, bias=config.bias)
        self.act = nn.GELU()
        self.proj = nn.Linear(hidden, config.d_model, bias=config.bias)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.d_model)
        self.attn = MultiHeadAttention(config.d_model, config.n_head, config.bias)
        self.ln_2 = LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.wte.weight = self.lm_head.weight
        self.register_buffer("pos", torch.arange(config.block_size), persistent=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        if t > self.config.block_size:
            raise ValueError(f"sequence length T={t} exceeds block_size {self.config.block_size}")
        x = self.wte(idx) + self.wpe(self.pos[:t])[None]
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def count_parameters(model):
    seen = {}
    for _, p in model.named_parameters(remove_duplicate=False):
        seen[id(p)] = p.numel()
    return sum(seen.values())
