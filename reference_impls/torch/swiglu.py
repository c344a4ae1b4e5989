import math

import torch
from torch import nn
from torch.nn import functional as F


class SwiGLU(nn.Module):
    gate = staticmethod(F.silu)  # the gate's activation (GeGLU: the exact gelu)

    def __init__(self, d, hidden, device=None, dtype=None):
        super().__init__()
        # the weights held [in, out], as the contract lays them out: y = x @ w, no transpose
        self.w1 = nn.Parameter(torch.empty(d, hidden, device=device, dtype=dtype))
        self.w3 = nn.Parameter(torch.empty(d, hidden, device=device, dtype=dtype))
        self.w2 = nn.Parameter(torch.empty(hidden, d, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        # a normal of std 1/sqrt(fan_in) per projection, drawn from torch's generator (seeded by manual_seed)
        for w in (self.w1, self.w3, self.w2):
            nn.init.normal_(w, std=1.0 / math.sqrt(w.shape[0]))

    def forward(self, X):
        # silu gates the w1 branch; the up branch x @ w3 is linear
        return (self.gate(X @ self.w1) * (X @ self.w3)) @ self.w2


IMPL = SwiGLU
