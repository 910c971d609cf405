"""Next-token training pairs and the language-model loss (day 49)."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def make_xy(chunk) -> tuple[Tensor, Tensor]:
    """A chunk of L+1 tokens -> x = chunk[:-1], y = chunk[1:]: y[t] is the token after x[t]."""
    chunk = torch.as_tensor(np.asarray(chunk)).to(torch.int64)
    if chunk.dim() != 1 or chunk.numel() < 2:
        raise ValueError(f"chunk must be 1-D with at least 2 tokens, got shape {tuple(chunk.shape)}")
    return chunk[:-1], chunk[1:]


def get_batch(data, batch_size: int, block_size: int, device="cpu",
              generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """batch_size random windows of block_size tokens, and the same windows shifted by one.

    A window starting at i needs tokens i .. i + block_size (block_size + 1 of them), so the valid
    starts are 0 .. len(data) - block_size - 1: there are len(data) - block_size of them.
    """
    data = torch.as_tensor(np.asarray(data)).to(torch.int64)
    if data.dim() != 1:
        raise ValueError(f"data must be 1-D, got shape {tuple(data.shape)}")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if len(data) < block_size + 1:
        raise ValueError(f"data has {len(data)} tokens; block_size={block_size} needs at least "
                         f"{block_size + 1}")
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in starts.tolist()])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in starts.tolist()])
    return x.to(device), y.to(device)


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of (B, T, V) logits against (B, T) targets, over all B*T positions."""
    B, T, V = logits.shape
    if targets.shape != (B, T):
        raise ValueError(f"targets must have shape {(B, T)}, got {tuple(targets.shape)}")
    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T).long())
