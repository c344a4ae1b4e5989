import torch
from torch import nn


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5, device=None, dtype=None):
        super().__init__()
        # factory keyword arguments and reset_parameters, as torch.nn's layers: it can be built on meta
        self.gain = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.eps = eps
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.gain)
        nn.init.zeros_(self.bias)

    def forward(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
        Xc = X32 - X32.mean(-1, keepdim=True)
        # two passes: the mean first, then the mean square of the centred values (no E[x^2] - E[x]^2)
        var = Xc.pow(2).mean(-1, keepdim=True)
        Y = (Xc * torch.rsqrt(var + self.eps)).to(X.dtype)
        return self.gain * Y + self.bias


IMPL = LayerNorm
