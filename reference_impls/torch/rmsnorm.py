import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
        rms = X32.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return self.gain * (X32 * rms).to(X.dtype)


IMPL = RMSNorm
