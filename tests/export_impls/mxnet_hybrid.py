"""A Gluon RMSNorm written as a HybridBlock: exportable (the bundled one is a Block, which is not)."""
from layer_conformance.layerside.mxnet_shim import apply

apply()
from mxnet import init  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class HybridRMSNorm(nn.HybridBlock):
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gain = self.params.get("gain", shape=(d,), init=init.One())
        self.eps = eps

    def hybrid_forward(self, F, X, gain):
        ms = F.mean(X ** 2, axis=-1, keepdims=True)
        return F.broadcast_mul(gain, F.broadcast_div(X, F.sqrt(ms + self.eps)))
