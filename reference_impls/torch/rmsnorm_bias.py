import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        # None registers "no bias": absent from parameters() and from state_dict
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None
        self.eps = eps

    def forward(self, X):
        rms = X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        Y = self.gain * X * rms
        return Y if self.bias is None else Y + self.bias


IMPL = RMSNorm
