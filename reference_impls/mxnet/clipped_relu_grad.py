from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class ClippedReLUGrad(autograd.Function):
    """Single-use: apply a fresh one per call, ClippedReLUGrad()(x)."""

    def forward(self, x):
        self.save_for_backward(x)
        return nd.relu(x)

    def backward(self, grad_output):
        (x,) = self.saved_tensors
        # ReLU gradient (zero at x = 0), then clipped to [-1, 1]
        return nd.clip(grad_output * (x > 0), -1.0, 1.0)


IMPL = ClippedReLUGrad
