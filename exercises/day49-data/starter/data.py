"""Day 49: next-token training pairs, random batches, and the language-model loss.

Fill in every function marked `raise NotImplementedError`. The decoder uses the tokens at
positions <= t to predict token t + 1, so a window of L + 1 tokens gives L (input, target) pairs.
Token ids are int64 everywhere (F.cross_entropy wants int64 class indices).
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def make_xy(chunk) -> tuple[Tensor, Tensor]:
    """A chunk of L+1 tokens -> (x, y) with x = chunk[:-1] and y = chunk[1:], both int64 of shape (L,).

    `chunk` is a list of ints, a 1-D numpy array or a 1-D tensor. y[t] is the token that FOLLOWS
    x[t]. Example: [502, 1204, 33, 991, 88] -> x = [502, 1204, 33, 991], y = [1204, 33, 991, 88].
    """
    raise NotImplementedError


def get_batch(data, batch_size: int, block_size: int, device="cpu",
              generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """batch_size random windows of data: x, y int64 of shape (batch_size, block_size) on `device`.

    - `data` is a 1-D numpy array or a 1-D tensor of token ids.
    - Each row of x is a window data[i : i + block_size] lying fully inside data, and the same
      row of y is that window shifted by one: data[i + 1 : i + 1 + block_size].
    - Every one of the len(data) - block_size valid start positions is equally likely, the last
      one (i = len(data) - block_size - 1) included.
    - Draw the random starts with `generator` (a torch.Generator) when one is given, so the same
      seed gives the same batch.
    - Raise ValueError (naming the argument) if len(data) < block_size + 1.
    """
    raise NotImplementedError


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """logits (B, T, V), targets (B, T) int64 -> the mean cross-entropy over all B*T positions.

    Returns a 0-dim tensor (so you can call .backward() on it).
    """
    raise NotImplementedError
