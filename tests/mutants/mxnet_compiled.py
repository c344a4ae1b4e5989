"""Gluon HybridBlocks under hybridize(): a broken one, caught by the ``compiled`` check, and a correct
one that passes it (tests/test_compiled.py)."""
from harness.adapters.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet.gluon import nn  # noqa: E402

from tests.mutants.catalogue import Mutant  # noqa: E402


class RMSNormHybrid(nn.HybridBlock):
    """A correct RMSNorm written with F (mx.nd eagerly, mx.sym once hybridized)."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps
        self.gain = self.params.get("gain", shape=(d,), init="ones")

    def hybrid_forward(self, F, X, gain):
        ms = F.mean(F.square(X), axis=-1, keepdims=True)
        return F.broadcast_mul(F.broadcast_div(X, F.sqrt(ms + self.eps)), gain)


class RMSNormAsnumpy(RMSNormHybrid):
    """Reads eps from the data with asnumpy(): an NDArray has values, a Symbol has none."""
    def hybrid_forward(self, F, X, gain):
        ms = F.mean(F.square(X), axis=-1, keepdims=True)
        eps = self.eps if float(ms.asnumpy().min()) > 0 else 1.0
        return F.broadcast_mul(F.broadcast_div(X, F.sqrt(ms + eps)), gain)


M = "tests.mutants.mxnet_compiled"
MUTANTS = [
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormAsnumpy", "compiled", "reads a tensor's value in Python",
           also=('values',), blocked=('gradients',)),
]
