"""PyTorch layers for tests/test_hints.py: mutants a hint needs that the catalogue lacks, and near misses."""
import torch
from torch import nn


class EpsDropped(nn.Module):
    """x / sqrt(mean x^2): eps left out (NaN on an all-zero row)."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        return self.gain * X / X.pow(2).mean(-1, keepdim=True).sqrt()


class RenamedAmbiguous(nn.Module):
    """Right, but its gain and bias are named 'scale' and 'shift', both of shape [d]: neither name nor
    shape tells which is which, so only --state-map can."""
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))
        self.shift = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, X):
        return X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt() * self.scale + self.shift



class BiasPlainTensor(nn.Module):
    """The bias as a plain tensor attribute: the parameters check names it; no other check may send the
    user to --state-map for it (that would not help)."""
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.bias = torch.zeros(d) if bias else None
        self.eps = eps

    def forward(self, X):
        y = X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt() * self.gain
        return y if self.bias is None else y + self.bias


class GainTensorsInList(nn.Module):
    """The gain as a plain tensor inside a plain Python list: neither a parameter nor in a container the module
    looks into (the nn.Parameter advice stands, not the container one alone)."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weights = [torch.ones(d)]
        self.eps = eps

    def forward(self, X):
        return self.weights[0] * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class GainInDict(nn.Module):
    """The gain, an nn.Parameter, inside a plain Python dict: the module does not look into it."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weights = {"gain": nn.Parameter(torch.ones(d))}
        self.eps = eps

    def forward(self, X):
        return self.weights["gain"] * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class GainStartsAtZero(nn.Module):
    """Registered right, but the gain starts at zeros where the contract's init is ones."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, X):
        return self.gain * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
