import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6, device=None, dtype=None):
        super().__init__()
        # factory keyword arguments and reset_parameters, as torch.nn's layers: it can be built on meta
        self.gain = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.eps = eps
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.gain)

    def forward(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
        rms = X32.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return self.gain * (X32 * rms).to(X.dtype)


IMPL = RMSNorm
