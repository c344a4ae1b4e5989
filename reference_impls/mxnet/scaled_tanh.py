from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class ScaledTanh(autograd.Function):
    """Single-use: apply a fresh one per call, ScaledTanh()(x)."""

    def forward(self, x):
        y = nd.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, grad_output):
        (y,) = self.saved_tensors
        return grad_output * (1 - y * y) * 0.5  # the true gradient, scaled by 0.5


IMPL = ScaledTanh
