import numpy as np
import torch
import torch.nn.functional as F


def make_xy(chunk):
    arr = np.asarray(chunk, dtype=np.int64)
    return torch.from_numpy(arr[:-1].copy()), torch.from_numpy(arr[1:].copy())


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    if isinstance(data, torch.Tensor):
        data = data.numpy()
    data = np.asarray(data).astype(np.int64)
    if data.shape[0] < block_size + 1:
        raise ValueError("data is shorter than block_size + 1")
    ix = torch.randint(0, data.shape[0] - block_size, (batch_size,), generator=generator).numpy()
    offsets = np.arange(block_size)
    x = data[ix[:, None] + offsets]
    y = data[ix[:, None] + offsets + 1]
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.transpose(1, 2), targets)
