"""PyTorch layers that run but do not survive the framework's own save formats (the export check)."""
import torch
from torch import nn

from tests.mutants.catalogue import Mutant


def _rms(X, eps):
    return X * X.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()


class LambdaAttribute(nn.Module):
    """An activation kept as a lambda attribute: torch.save of the whole module cannot pickle it."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps
        self.post = lambda t: t  # noqa: E731

    def forward(self, X):
        return self.post(self.gain * _rms(X, self.eps))


class RandomNonPersistentBuffer(nn.Module):
    """A random offset kept out of checkpoints (persistent=False): a fresh instance draws another."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps
        self.register_buffer("offset", torch.randn(d) * 1e-3, persistent=False)

    def forward(self, X):
        return self.gain * _rms(X, self.eps) + self.offset


MUTANTS = [
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:LambdaAttribute", "export",
           "torch.save of a whole module pickles every attribute"),
    Mutant("torch", "rmsnorm", "tests.mutants.torch_export:RandomNonPersistentBuffer", "export",
           "state_dict: case 'random': loaded in a fresh process, the layer is not bit-equal",
           also=('properties', 'serialization', 'values'), blocked=('native',)),
]
