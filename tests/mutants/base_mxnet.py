"""The correct Gluon 1.9.1 blocks the MXNet mutants (tests/mutants/mxnet_*.py) derive from, one per contract
(or the bundled reference, where its hooks serve), cut into the hooks a mistake lives in: a mutant overrides the
one it gets wrong and states nothing else. Not a catalogue module (no MUTANTS): its name does not start with the
framework's.

The RMSNorm computes its statistic in the input's own dtype, as the mutants always did: each mutant's numbers
are those it had before it derived from here.
"""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class RMSNorm(nn.Block):
    """gain * X / sqrt(mean(X^2) + eps) over the last axis, the gain registered through the block's
    ParameterDict (on 1.9.1 assignment alone does not register it)."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.make_gain(d)
        self.eps = eps

    def make_gain(self, d):
        self.gain = self.params.get('gain', shape=(d,), init=init.One())

    def forward(self, X):
        return self.gain.data(X.context) * X / self.rms(X)

    def rms(self, X):
        """sqrt(mean(X^2) + eps) over the last axis, one per row."""
        return nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)


class Dropout(nn.Block):
    """Drops with probability p in training (autograd.is_training(), which train_mode() sets), rescales the
    survivors by 1 / (1 - p), draws a fresh mask per call."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def forward(self, X):
        return self.drop(X) if autograd.is_training() else X

    def drop(self, X):
        return X * self.keep(X) / (1.0 - self.p)

    def keep(self, X):
        return nd.random.uniform(0, 1, shape=X.shape, ctx=X.context, dtype=X.dtype) >= self.p
