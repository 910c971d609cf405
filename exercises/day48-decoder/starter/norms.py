"""Day 46: LayerNorm and RMSNorm over the last dimension.

Fill in every method marked `raise NotImplementedError`. Both normalise each vector x[..., :] of
d features on its own (never across the batch or across positions).
"""
import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        """Create self.eps = eps, self.weight = nn.Parameter(torch.ones(d)) and, when bias is True,
        self.bias = nn.Parameter(torch.zeros(d)); when bias is False, self.bias = None (no
        parameter at all)."""
        super().__init__()
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """x (..., d) -> (..., d): y = (x - mean) / sqrt(var + eps) * weight + bias.

        mean and var are taken over the last dim; var is the BIASED (population) variance
        mean((x - mean)^2), dividing by d, not d - 1. eps goes inside the square root.
        Without a bias: y = (x - mean) / sqrt(var + eps) * weight.
        """
        raise NotImplementedError


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        """Create self.eps = eps and self.weight = nn.Parameter(torch.ones(d)); no bias."""
        super().__init__()
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        """x (..., d) -> (..., d): y = x / sqrt(mean(x^2) + eps) * weight, mean over the last dim.

        No mean subtraction: RMSNorm rescales x itself by its root mean square.
        """
        raise NotImplementedError
