"""Layers whose failure in a dtype is the precision they compute at (layer_conformance.checks.precision): the source
chapter's RMSNorm with its statistic in the input's dtype, and one that computes float64 inputs in float32."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import nd  # noqa: E402

from layer_conformance.reference_impls.mxnet.rmsnorm import RMSNorm as _RMSNorm  # noqa: E402
from tests.mutants.catalogue import Mutant  # noqa: E402
from tests.mutants.precision_causes import FLOAT32, NARROW  # noqa: E402

M = "tests.mutants.mxnet_precision"


class RMSNormChapter(_RMSNorm):
    """The source chapter's formula in Gluon: the mean square in the input's own dtype."""
    def forward(self, X):
        return self.gain.data(X.context) * X / nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)


class RMSNormFloat32Inside(_RMSNorm):
    """Computes in float32 whatever the input and casts back: float64 inputs get float32 precision."""
    def forward(self, X):
        X32 = X.astype("float32")
        rms = nd.sqrt((X32 ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return (self.gain.data(X.context).astype("float32") * X32 / rms).astype(X.dtype)


MUTANTS = [
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormChapter", "values", NARROW.format(dtype="float16"), dtype="float16",
           blocked=("gradients", "properties")),
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormFloat32Inside", "gradients", FLOAT32, dtype="float64"),
]
