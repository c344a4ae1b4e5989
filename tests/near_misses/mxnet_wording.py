"""MXNet Gluon 1.9.1 layers and functions for tests/test_hints.py whose hints must speak Gluon's words."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class Log1pExpNaive(autograd.Function):
    """log(1 + exp(x)) as it reads, with the stable backward: exp(x) overflows float16 beyond x = 11."""

    def forward(self, x):
        self.save_for_backward(x)
        return nd.log1p(nd.exp(x))

    def backward(self, grad_output):
        (x,) = self.saved_tensors
        return grad_output * nd.sigmoid(x)


class BatchHardCoded(nn.HybridBlock):
    """RMSNorm that reshapes its input to the batch size it was built for (a number in the graph, F.reshape(X,
    shape=(16, d))): right at the batch of 16 it was written for, but the graph cannot take another."""
    def __init__(self, d, eps=1e-6, batch=16, **kwargs):
        super().__init__(**kwargs)
        self.d, self.eps, self.batch = d, eps, batch
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One())

    def hybrid_forward(self, F, X, gain):
        rows = F.reshape(X, shape=(self.batch, self.d))
        y = F.broadcast_div(rows, F.sqrt(F.mean(F.square(rows), axis=-1, keepdims=True) + self.eps))
        return F.broadcast_mul(gain, F.reshape_like(y, X))
