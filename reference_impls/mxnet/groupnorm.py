import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class GroupNorm(nn.Block):
    # channels first, X: [N, C, ...]; gain and bias per channel (gluon.nn.GroupNorm 1.9.1 has them per group)
    def __init__(self, groups, channels, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        # On 1.9.1 a parameter registers through the block's ParameterDict, not by assignment
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(channels,), init=init.One())
            self.bias = self.params.get('bias', shape=(channels,), init=init.Zero())
        self.groups = groups
        self.eps = eps

    def forward(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.astype("float32") if X.dtype == np.float16 else X
        # consecutive channels form a group: [N, G, C/G * positions]
        Xg = X32.reshape((X.shape[0], self.groups, -1))
        Xc = nd.broadcast_sub(Xg, Xg.mean(axis=-1, keepdims=True))
        var = (Xc ** 2).mean(axis=-1, keepdims=True)  # two passes, the biased variance
        Y = nd.broadcast_div(Xc, nd.sqrt(var + self.eps)).reshape(X.shape).astype(X.dtype)
        per_channel = (1, -1) + (1,) * (X.ndim - 2)
        ctx = X.context
        return nd.broadcast_add(nd.broadcast_mul(Y, self.gain.data(ctx).reshape(per_channel)),
                                self.bias.data(ctx).reshape(per_channel))


IMPL = GroupNorm
