"""The bug hunt fixed, with the dtype's most negative finite value as the fill (fits float16)."""
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:  # the seed's toy GPT
    vocab_size: int = 100
    block_size: int = 16
    d_model: int = 32
    n_layer: int = 2
    n_head: int = 4


def attention(q, k, v):
    """Causal scaled dot-product attention: (B, h, T, d_k) -> (B, h, T, d_k)."""
    B, h, T, d_k = q.shape
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)     # (A) unit-variance scores: / sqrt(d_k)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (B) block only j > i
    scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.w_q = nn.Linear(config.d_model, config.d_model, bias=False)
        self.w_k = nn.Linear(config.d_model, config.d_model, bias=False)
        self.w_v = nn.Linear(config.d_model, config.d_model, bias=False)
        self.w_o = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        d_k = C // self.n_head
        q = self.w_q(x).view(B, T, self.n_head, d_k).transpose(1, 2)          # (B, h, T, d_k)
        k = self.w_k(x).view(B, T, self.n_head, d_k).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.n_head, d_k).transpose(1, 2)
        y = attention(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
        return self.w_o(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.d_model, 4 * config.d_model, bias=False)
        self.proj = nn.Linear(4 * config.d_model, config.d_model, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))                   # (C) Pre-LN: the residual stays clean
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight                                 # weight tying
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return logits, loss


def make_xy(chunk):
    chunk = torch.as_tensor(np.asarray(chunk), dtype=torch.long)
    x, y = chunk[:-1], chunk[1:]                          # (D) the target is the next token
    return x, y


def get_batch(data, batch_size, block_size, generator=None):
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    pairs = [make_xy(data[i:i + block_size + 1]) for i in starts.tolist()]
    return torch.stack([x for x, _ in pairs]), torch.stack([y for _, y in pairs])


def train(data=None, config=None, steps=300, batch_size=32, lr=3e-3, seed=0):
    """Train on `data` (1-D token ids; random tokens if None) and return the loss of every step."""
    config = config or GPTConfig()
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    if data is None:
        data = torch.randint(config.vocab_size, (10_000,), generator=generator)
    data = torch.as_tensor(np.asarray(data), dtype=torch.long)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x, y = get_batch(data, batch_size, config.block_size, generator=generator)
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    losses = train()
    print(f"first loss {losses[0]:.4f} (ln 100 = {math.log(100):.4f}), last loss {losses[-1]:.4f}")
