from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class Dropout(nn.Block):
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def forward(self, X):
        # Gluon has no per-block mode: autograd.train_mode() / record() set this global flag,
        # so it reaches every block in a container. Outside them it is off: the identity.
        if not autograd.is_training() or self.p == 0:
            return X
        keep = nd.random.uniform(0, 1, shape=X.shape, ctx=X.context, dtype=X.dtype) >= self.p
        return X * keep / (1.0 - self.p)


IMPL = Dropout
