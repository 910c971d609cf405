"""Correct: data.py imports a helper module the learner ships beside it (SPEC: extra files are
available when a learner file imports them)."""
import torch
import torch.nn.functional as F

from _util import as_long_1d, windows_at


def make_xy(chunk):
    chunk = as_long_1d(chunk, "chunk")
    return chunk[:-1], chunk[1:]


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = as_long_1d(data, "data")
    if data.numel() <= block_size:
        raise ValueError(f"data needs more than block_size={block_size} tokens")
    starts = torch.randint(0, data.numel() - block_size, (batch_size,), generator=generator)
    return windows_at(data, starts, block_size).to(device), windows_at(data, starts + 1, block_size).to(device)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten())
