"""The correct PyTorch layers the torch mutants (tests/mutants/torch_*.py) derive from, one per contract, cut
into the hooks a mistake lives in: a mutant overrides the one it gets wrong and states nothing else. Not a
catalogue module (no MUTANTS): its name does not start with the framework's.

The RMSNorm computes its statistic in the input's own dtype and takes no factory keywords, as the mutants
always did: each mutant's numbers, and its construction check, are those it had before it derived from here
(the mutants of the dtype and precision checks derive from the bundled reference, which takes them).
"""
import torch
from torch import nn


class RMSNorm(nn.Module):
    """gain * X / sqrt(mean(X^2) + eps) over the last axis, the gain a Parameter of ones."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.make_gain(d)
        self.eps = eps

    def make_gain(self, d):
        self.gain = nn.Parameter(torch.ones(d))

    def forward(self, X):
        return self.gain * X * self.inverse_rms(X)

    def inverse_rms(self, X):
        """1 / sqrt(mean(X^2) + eps) over the last axis, one per row."""
        return X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class CausalMask(nn.Module):
    """The mask precomputed once for the longest sequence, held as a persistent buffer, sliced per call."""
    def __init__(self, max_len):
        super().__init__()
        self.hold_mask(self.masked(max_len))

    def masked(self, n):
        """Where a query (row) may not see a key (column): the keys after it."""
        return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)

    def hold_mask(self, mask):
        self.register_buffer("mask", mask)

    def forward(self, scores):
        T = scores.shape[-1]
        return scores.masked_fill(self.mask[:T, :T], float("-inf"))


class Dropout(nn.Module):
    """Drops with probability p in training (self.training, which .train()/.eval() set), rescales the survivors
    by 1 / (1 - p), draws a fresh mask per call."""
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, X):
        return self.drop(X) if self.training else X

    def drop(self, X):
        return X * self.keep(X) / (1.0 - self.p)

    def keep(self, X):
        return (torch.rand_like(X) >= self.p).to(X.dtype)
