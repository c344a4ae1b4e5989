"""Gluon HybridBlocks under hybridize(): a broken one, caught by the ``compiled`` check, and a correct
one that passes it (tests/test_compiled.py)."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd  # noqa: E402
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



class DropoutPythonFlag(nn.HybridBlock):
    """Dropout that branches in Python on autograd.is_training(): eagerly the flag is read on every call,
    hybridized the branch taken when the graph was built (in training) is kept for every later call."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def hybrid_forward(self, F, X):
        if autograd.is_training() and self.p > 0:
            return F.Dropout(X, p=self.p, mode="always")
        return F.identity(X)


class DropoutOp(nn.HybridBlock):
    """Dropout through F.Dropout, whose mode the operator reads when it runs: right hybridized too."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def hybrid_forward(self, F, X):
        return F.Dropout(X, p=self.p)


M = "tests.mutants.mxnet_compiled"
MUTANTS = [
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormAsnumpy", "compiled", "reads a tensor's value in Python",
           also=('values', 'export', 'batching', 'abstract'), blocked=('gradients',)),
    Mutant("mxnet", "dropout", f"{M}:DropoutPythonFlag", "compiled", "a flag such as the training mode"),
]
