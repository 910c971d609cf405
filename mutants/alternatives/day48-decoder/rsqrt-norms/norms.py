import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        if bias:
            self.bias = nn.Parameter(torch.zeros(d))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
        y = (x - mean) * torch.rsqrt(var + self.eps)
        y = y * self.weight
        return y if self.bias is None else y + self.bias


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        ms = torch.mean(torch.square(x), dim=-1, keepdim=True)
        return self.weight * (x / (ms + self.eps).sqrt())
