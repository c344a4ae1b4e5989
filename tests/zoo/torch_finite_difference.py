"""Gain-free PyTorch RMSNorms for tests/test_zoo.py's finite-difference tests, each a no-argument factory or
class that an executor imports by spec (``tests.zoo.torch_finite_difference:NAME``) and builds.

Not all correct: the scaled backwards are wrong on purpose (the comparison must tell them), and BFloat16 computes
too coarsely for any finite difference."""
import torch
from torch import nn

from tests.zoo.torch_layers import upcast_rmsnorm_grad_scaled


def GradScaled1():
    """A float32 RMSNorm with a hand-written backward: correct."""
    return upcast_rmsnorm_grad_scaled(1.0)


def GradScaled1003():
    """The same, its backward 0.3 % too large."""
    return upcast_rmsnorm_grad_scaled(1.003)


def GradScaled099():
    """The same, its backward 1 % too small."""
    return upcast_rmsnorm_grad_scaled(0.99)


class BFloat16(nn.Module):
    """Computes in bfloat16 whatever its input: coarser than float32."""
    def forward(self, X):
        x = X.to(torch.bfloat16)
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).to(X.dtype)
