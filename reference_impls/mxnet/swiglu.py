import math

import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class SwiGLU(nn.Block):
    @staticmethod
    def gate(a):
        """The gate's activation, silu (GeGLU: the exact gelu)."""
        return a * nd.sigmoid(a)

    def __init__(self, d, hidden, **kwargs):
        super().__init__(**kwargs)
        # On 1.9.1 a parameter registers through the block's ParameterDict, not by assignment; held [in, out], as
        # the contract lays them out (y = x @ w), a normal of std 1/sqrt(fan_in) from mx.random's seeded generator
        with self.name_scope():
            self.w1 = self.params.get('w1', shape=(d, hidden), init=init.Normal(1.0 / math.sqrt(d)))
            self.w3 = self.params.get('w3', shape=(d, hidden), init=init.Normal(1.0 / math.sqrt(d)))
            self.w2 = self.params.get('w2', shape=(hidden, d), init=init.Normal(1.0 / math.sqrt(hidden)))

    def forward(self, X):
        # MXNet 1.9.1's dot has no float16 kernel on CPU (its forward returns zeros and NaN, its backward raises):
        # float16 is computed in float32 and rounded once. dot contracts X's last axis, any rank
        wide = "float32" if X.dtype == np.float16 else X.dtype
        w1, w3, w2 = (p.data(X.context).astype(wide) for p in (self.w1, self.w3, self.w2))
        Xw = X.astype(wide)
        # silu gates the w1 branch; the up branch x @ w3 is linear
        return nd.dot(self.gate(nd.dot(Xw, w1)) * nd.dot(Xw, w3), w2).astype(X.dtype)


IMPL = SwiGLU
