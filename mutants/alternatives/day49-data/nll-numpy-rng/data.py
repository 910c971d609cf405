"""Correct: the loss as F.nll_loss of F.log_softmax; get_batch draws its starts with the torch
generator when one is given (the contract's reproducibility) and with numpy's global RNG otherwise."""
import numpy as np
import torch
import torch.nn.functional as F


def make_xy(chunk):
    t = torch.as_tensor(np.asarray(chunk), dtype=torch.long)
    return t[:-1], t[1:]


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = torch.as_tensor(np.asarray(data), dtype=torch.long)
    n_starts = len(data) - block_size          # starts 0 .. len(data) - block_size - 1
    if n_starts < 1:
        raise ValueError("len(data) must be at least block_size + 1")
    if generator is not None:
        starts = torch.randint(n_starts, (batch_size,), generator=generator)
    else:
        starts = torch.from_numpy(np.random.randint(0, n_starts, size=batch_size))
    offsets = torch.arange(block_size)
    idx = starts[:, None] + offsets[None, :]
    return data[idx].to(device), data[idx + 1].to(device)


def lm_loss(logits, targets):
    log_probs = F.log_softmax(logits, dim=-1)
    return F.nll_loss(log_probs.flatten(0, 1), targets.flatten())
