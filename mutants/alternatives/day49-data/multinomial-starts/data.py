"""Correct: the random starts drawn with torch.multinomial over equal weights (with replacement,
from the generator), the windows gathered with one advanced index."""
import numpy as np
import torch
import torch.nn.functional as F


def _tokens(values):
    if isinstance(values, torch.Tensor):
        return values.to(torch.long).flatten()
    return torch.from_numpy(np.array(values, dtype=np.int64)).flatten()


def make_xy(chunk):
    chunk = _tokens(chunk)
    return chunk[:-1], chunk[1:]


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = _tokens(data)
    n_starts = data.numel() - block_size
    if n_starts <= 0:
        raise ValueError(f"len(data) = {data.numel()} < block_size + 1 = {block_size + 1}")
    weights = torch.ones(n_starts)
    starts = torch.multinomial(weights, batch_size, replacement=True, generator=generator)
    idx = starts.unsqueeze(1) + torch.arange(block_size + 1)
    windows = data[idx]                           # (B, T + 1)
    return windows[:, :-1].to(device), windows[:, 1:].to(device)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="mean")
