from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd  # noqa: E402


class _ReverseBy(autograd.Function):
    """The identity with the VJP -lam * g. lam is a setting, given to the constructor rather than to
    forward: forward's arguments are what autograd differentiates (as in scaled)."""

    def __init__(self, lam):
        super().__init__()
        self.lam = lam

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return -self.lam * g


def gradient_reversal(x, lam):
    # a Function is single-use: a fresh one per call
    return _ReverseBy(lam.asscalar().item())(x)


IMPL = gradient_reversal
