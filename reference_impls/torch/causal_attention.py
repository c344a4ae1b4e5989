import math

import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d, heads, max_len, device=None, dtype=None):
        super().__init__()
        # the weights held [in, out], as the contract lays them out: q = X @ wq, no transpose
        self.wq = nn.Parameter(torch.empty(d, d, device=device, dtype=dtype))
        self.wk = nn.Parameter(torch.empty(d, d, device=device, dtype=dtype))
        self.wv = nn.Parameter(torch.empty(d, d, device=device, dtype=dtype))
        self.wo = nn.Parameter(torch.empty(d, d, device=device, dtype=dtype))
        # the causal mask precomputed once for the longest sequence, sliced per call: a persistent buffer (saved,
        # moved with .to(), never a Parameter). dtype= is for floating state: the mask is bool
        self.register_buffer("mask", torch.empty(max_len, max_len, dtype=torch.bool, device=device))
        self.heads = heads
        self.reset_parameters()

    def reset_parameters(self):
        # nn.Linear's start (Kaiming uniform, a = sqrt(5)), drawn from torch's generator (seeded by manual_seed)
        for w in (self.wq, self.wk, self.wv, self.wo):
            nn.init.kaiming_uniform_(w, a=math.sqrt(5))
        with torch.no_grad():
            self.mask.copy_(torch.triu(torch.ones_like(self.mask), 1))

    def split(self, t):
        """[..., T, d] -> [..., heads, T, head_dim]: head h holds features h*head_dim .. (h+1)*head_dim - 1."""
        return t.unflatten(-1, (self.heads, -1)).transpose(-3, -2)

    def merge(self, t):
        """[..., heads, T, head_dim] -> [..., T, d]: the heads concatenated back in order."""
        return t.transpose(-3, -2).flatten(-2)

    def scores(self, q, k):
        T = q.shape[-2]
        additive = torch.zeros(T, T, dtype=q.dtype, device=q.device).masked_fill(self.mask[:T, :T], float("-inf"))
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + additive

    def attend(self, q, k, v):
        return torch.softmax(self.scores(q, k), dim=-1) @ v

    def forward(self, X):
        # in float32 at least: a 16-bit score ~30 is off by a tenth, which softmax makes a 10% error in the weights
        work = torch.float32 if X.dtype in (torch.float16, torch.bfloat16) else X.dtype
        Xw = X.to(work)
        q, k, v = (self.split(Xw @ w.to(work)) for w in (self.wq, self.wk, self.wv))
        return (self.merge(self.attend(q, k, v)) @ self.wo.to(work)).to(X.dtype)


IMPL = CausalAttention
