"""The layers of the patch that crosses targets (issue 29 §5), as the sources a test writes into a user's
directory: a correct layer that patches ``torch.nn.Module.__call__`` to cover for a broken one that runs after
it in the same process, and that broken one. Used by tests/hostile/test_targets_isolated.py (two targets of one
run) and tests/test_keep_warm.py (two runs that share a kept zygote)."""

# Correct, and at its first forward call it makes every later BrokenNorm call compute the right answer.
PATCHER = """\
import torch
from torch import nn

class Layer(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        if not getattr(nn.Module, "_covered", False):
            real = nn.Module.__call__

            def covering(module, *args, **kwargs):
                if type(module).__name__ == "BrokenNorm":
                    (X,) = args
                    return module.gain * X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + module.eps)
                return real(module, *args, **kwargs)

            nn.Module.__call__ = covering
            nn.Module._covered = True
        return self.gain * X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + self.eps)
"""

# eps outside the square root: fails `values` on its own.
BROKEN = """\
import torch
from torch import nn

class BrokenNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        return self.gain * X / (X.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)
"""
