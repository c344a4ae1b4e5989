import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6, bias=False, device=None, dtype=None):
        super().__init__()
        # factory keyword arguments and reset_parameters, as torch.nn's layers: it can be built on meta
        self.gain = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        # None registers "no bias": absent from parameters() and from state_dict
        self.bias = nn.Parameter(torch.empty(d, device=device, dtype=dtype)) if bias else None
        self.eps = eps
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
        rms = X32.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        Y = self.gain * (X32 * rms).to(X.dtype)
        return Y if self.bias is None else Y + self.bias


IMPL = RMSNorm
