"""Correct Gluon blocks that compute at a fixed precision (tests/test_zoo.py)."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class RMSNormFloat32(nn.Block):
    """Normalizes in float32 whatever the input's dtype; the result in the input's dtype."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One())
        self.eps = eps

    def forward(self, X):
        x = X.astype("float32")
        y = x / nd.sqrt((x ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return (self.gain.data(X.context).astype("float32") * y).astype(X.dtype)
