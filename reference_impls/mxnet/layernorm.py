import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class LayerNorm(nn.Block):
    def __init__(self, d, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        # On 1.9.1 a parameter registers through the block's ParameterDict, not by assignment
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One())
            self.bias = self.params.get('bias', shape=(d,), init=init.Zero())
        self.eps = eps

    def forward(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.astype("float32") if X.dtype == np.float16 else X
        Xc = nd.broadcast_sub(X32, X32.mean(axis=-1, keepdims=True))
        # two passes: the mean first, then the mean square of the centred values (no E[x^2] - E[x]^2)
        var = (Xc ** 2).mean(axis=-1, keepdims=True)
        Y = nd.broadcast_div(Xc, nd.sqrt(var + self.eps)).astype(X.dtype)
        ctx = X.context
        return nd.broadcast_add(nd.broadcast_mul(Y, self.gain.data(ctx)), self.bias.data(ctx))


IMPL = LayerNorm
