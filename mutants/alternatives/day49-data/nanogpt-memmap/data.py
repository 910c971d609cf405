"""Correct, written like nanoGPT's train.py: the data treated as a numpy array (np.memmap there),
windows cut with numpy and converted per row, F.cross_entropy on views with ignore_index=-1."""
import numpy as np
import torch
from torch.nn import functional as F


def make_xy(chunk):
    chunk = np.asarray(chunk)
    x = torch.from_numpy(chunk[:-1].astype(np.int64))
    y = torch.from_numpy(chunk[1:].astype(np.int64))
    return x, y


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = np.asarray(data)
    if len(data) < block_size + 1:
        raise ValueError(f"need at least block_size + 1 = {block_size + 1} tokens, got {len(data)}")
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y


def lm_loss(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
