"""Helpers the learner keeps beside data.py (imported by it)."""
import numpy as np
import torch


def as_long_1d(values, what="tokens"):
    t = values.long() if torch.is_tensor(values) else torch.from_numpy(np.asarray(values).astype(np.int64))
    if t.ndim != 1:
        raise ValueError(f"{what} must be 1-D")
    return t


def windows_at(data, starts, length):
    return torch.stack([data[s:s + length] for s in starts.tolist()])
