"""Day 49 solution saved with a UTF-8 BOM and CRLF line endings (Windows Notepad)."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def _as_tokens(values, name: str) -> Tensor:
    """A list, numpy array or tensor of token ids -> a 1-D int64 tensor."""
    if isinstance(values, Tensor):
        tokens = values.detach().to(torch.int64)
    else:
        tokens = torch.from_numpy(np.asarray(values).astype(np.int64))
    if tokens.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(tokens.shape)}")
    return tokens


def make_xy(chunk) -> tuple[Tensor, Tensor]:
    chunk = _as_tokens(chunk, "chunk")
    if len(chunk) < 2:
        raise ValueError(f"chunk needs at least 2 tokens, got {len(chunk)}")
    return chunk[:-1], chunk[1:]        # y[t] is the token after x[t]


def get_batch(data, batch_size, block_size, device="cpu", generator=None):
    data = _as_tokens(data, "data")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if len(data) < block_size + 1:
        raise ValueError(f"data has {len(data)} tokens, but block_size={block_size} needs at "
                         f"least block_size + 1 = {block_size + 1}")
    # a window starting at i needs tokens i .. i + block_size, so i <= len(data) - block_size - 1;
    # randint's high is exclusive: len(data) - block_size starts, the last one included
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix.tolist()])          # (B, T)
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])  # (B, T)
    return x.to(device), y.to(device)


def lm_loss(logits, targets):
    B, T, V = logits.shape
    # F.cross_entropy wants (N, V) against (N,): flatten batch and time into one axis
    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))
