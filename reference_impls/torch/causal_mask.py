import torch
from torch import nn


class CausalMask(nn.Module):
    def __init__(self, max_len):
        super().__init__()
        # Precompute once for the longest sequence; slice per call
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1))

    def forward(self, scores):
        T = scores.shape[-1]
        return scores.masked_fill(self.mask[:T, :T], float("-inf"))


IMPL = CausalMask
