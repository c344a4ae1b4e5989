"""Gluon blocks that run imperatively but cannot be exported (the export check)."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

from tests.mutants.catalogue import Mutant  # noqa: E402


class ConstantAsNDArray(nn.HybridBlock):
    """A constant held as an NDArray attribute: fine imperatively (F is nd), no graph node when hybridized."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gain = self.params.get("gain", shape=(d,), init=init.One())
        self.eps = nd.array([eps])

    def hybrid_forward(self, F, X, gain):
        ms = F.mean(X ** 2, axis=-1, keepdims=True)
        return F.broadcast_mul(gain, F.broadcast_div(X, F.sqrt(F.broadcast_add(ms, self.eps))))


MUTANTS = [
    # the constant held as a plain NDArray is untracked: `parameters` names it, and export (which needs
    # it in the graph) is blocked by it
    Mutant("mxnet", "rmsnorm", "tests.mutants.mxnet_export:ConstantAsNDArray", "parameters",
           "untracked tensor attribute 'eps' (NDArray [1])", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'abstract')),
]
