import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class RMSNorm(nn.Block):
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        # On 1.9.1 a parameter registers through the block's ParameterDict, not by assignment
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One())
        self.eps = eps

    def forward(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = X.astype("float32") if X.dtype == np.float16 else X
        rms = nd.sqrt((X32 ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return self.gain.data(X.context) * (X32 / rms).astype(X.dtype)


IMPL = RMSNorm
