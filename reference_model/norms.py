"""LayerNorm and RMSNorm over the last dimension (day 46)."""
import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, with the biased (population) variance."""

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        y = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return y + self.bias if self.bias is not None else y


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight: no mean subtraction, no bias."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
