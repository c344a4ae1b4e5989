"""A correct torch RMSNorm whose whole-module pickling hangs: the export check must end at its timeout,
with the fresh process it forked gone too."""
import time

import torch
from torch import nn


class HangsWhenPickled(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        return self.gain * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()

    def __reduce_ex__(self, protocol):
        if not torch.compiler.is_compiling():
            time.sleep(3600)
        return super().__reduce_ex__(protocol)
