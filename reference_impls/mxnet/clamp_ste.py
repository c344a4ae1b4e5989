from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class ClampSTE(autograd.Function):
    """clip(X, lo, hi), gradient only strictly inside. Single-use: a fresh one per call."""

    def forward(self, X, lo, hi):
        self.save_for_backward(X, lo, hi)
        # nd.clip takes its bounds as Python numbers
        return nd.clip(X, lo.asscalar().item(), hi.asscalar().item())

    def backward(self, grad_output):
        X, lo, hi = self.saved_tensors
        # strictly inside only: no gradient at the boundary. backward must return an array for
        # every input; the bounds are settings, so theirs is zero
        inside = nd.broadcast_greater(X, lo) * nd.broadcast_lesser(X, hi)
        return grad_output * inside, nd.zeros_like(lo), nd.zeros_like(hi)


IMPL = ClampSTE
