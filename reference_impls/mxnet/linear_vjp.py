from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class Linear(autograd.Function):
    """W x + b with a hand-written VJP. Single-use: apply a fresh one per call, Linear()(W, x, b)."""

    def forward(self, W, x, b):
        self.save_for_backward(W, x)  # the residuals the VJP needs
        return nd.dot(W, x) + b

    def backward(self, g):
        W, x = self.saved_tensors
        # never the Jacobian: an outer product and a transposed product
        grad_W = nd.dot(g.reshape((-1, 1)), x.reshape((1, -1)))
        return grad_W, nd.dot(W, g, transpose_a=True), g


IMPL = Linear
