from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class Log1pExp(autograd.Function):
    """Single-use: apply a fresh one per call, Log1pExp()(x)."""

    def forward(self, x):
        self.save_for_backward(x)
        # log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): exp never overflows
        return nd.relu(x) + nd.log1p(nd.exp(-nd.abs(x)))

    def backward(self, grad_output):
        (x,) = self.saved_tensors
        # exp(x) / (1 + exp(x)) overflows to inf / inf; sigmoid is stable
        return grad_output * nd.sigmoid(x)


IMPL = Log1pExp
