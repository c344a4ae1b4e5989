"""MXNet Gluon 1.9.1 layers for tests/test_hints.py."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class GainFrozen(nn.Block):
    """The gain created with grad_req='null': in collect_params(), but no Trainer updates it."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One(), grad_req='null')
        self.eps = eps

    def forward(self, X):
        return self.gain.data(X.context) * X / nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)


class GainNDArray(nn.Block):
    """The gain held as an NDArray attribute: not a Parameter, so not in collect_params()."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.gain = nd.ones((d,))
        self.eps = eps

    def forward(self, X):
        return self.gain.as_in_context(X.context) * X / nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)
