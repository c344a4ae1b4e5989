from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class SignSTE(autograd.Function):
    """Single-use, like every autograd.Function: apply a fresh one per call, SignSTE()(x)."""

    def forward(self, x):
        return nd.sign(x)

    def backward(self, grad_output):
        # Pass the upstream gradient directly, as if forward were the identity
        return grad_output


IMPL = SignSTE
