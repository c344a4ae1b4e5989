import torch
from torch import nn


class GroupNorm(nn.Module):
    def __init__(self, groups, channels, eps=1e-5, device=None, dtype=None):
        super().__init__()
        # factory keyword arguments and reset_parameters, as torch.nn's layers: it can be built on meta
        self.gain = nn.Parameter(torch.empty(channels, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(channels, device=device, dtype=dtype))
        self.groups = groups
        self.eps = eps
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.gain)
        nn.init.zeros_(self.bias)

    def forward(self, X):
        # X: [N, C, ...]. The statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
        N, C = X.shape[:2]
        # consecutive channels form a group: [N, G, C/G * positions]
        Xg = X32.reshape(N, self.groups, -1)
        Xc = Xg - Xg.mean(-1, keepdim=True)
        var = Xc.pow(2).mean(-1, keepdim=True)  # two passes, the biased variance
        Y = (Xc * torch.rsqrt(var + self.eps)).reshape(X.shape).to(X.dtype)
        per_channel = (C,) + (1,) * (X.dim() - 2)
        return self.gain.reshape(per_channel) * Y + self.bias.reshape(per_channel)


IMPL = GroupNorm
