import numpy as np
import torch
import torch.nn.functional as F


def make_xy(chunk):
    chunk = torch.tensor(chunk, dtype=torch.long) if not torch.is_tensor(chunk) else chunk.long()
    x, y = chunk[:-1], chunk[1:]
    return x, y


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = torch.as_tensor(data)
    if len(data) <= block_size:
        raise ValueError("data must have more than block_size tokens")
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix]).long()
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix]).long()
    return x.to(device), y.to(device)


def lm_loss(logits, targets):
    V = logits.size(-1)
    return F.cross_entropy(logits.view(-1, V), targets.view(-1))
