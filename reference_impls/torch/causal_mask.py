import torch
from torch import nn


class CausalMask(nn.Module):
    def __init__(self, max_len, device=None, dtype=None):
        super().__init__()
        # Precompute once for the longest sequence; slice per call. dtype= is for floating state: the mask
        # is bool. reset_parameters fills it, so that a build on meta (then to_empty) can be initialised
        self.register_buffer("mask", torch.empty(max_len, max_len, dtype=torch.bool, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            self.mask.copy_(torch.triu(torch.ones_like(self.mask), 1))

    def forward(self, scores):
        T = scores.shape[-1]
        return scores.masked_fill(self.mask[:T, :T], float("-inf"))


IMPL = CausalMask
