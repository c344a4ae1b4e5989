"""swiglu's Gluon mutants: the bundled SwiGLU block (ParameterDict weights [in, out]) with one mistake each."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import gluon, init, nd  # noqa: E402

from layer_conformance.reference_impls.mxnet.swiglu import SwiGLU  # noqa: E402
from tests.mutants.catalogue import Mutant  # noqa: E402

M = "tests.mutants.mxnet_swiglu"


class SwiGLUGelu(SwiGLU):
    """GeGLU where SwiGLU is asked for: the exact (erf) gelu gates the w1 branch instead of silu."""
    def forward(self, X):
        ctx = X.context
        gate = nd.LeakyReLU(nd.dot(X, self.w1.data(ctx)), act_type="gelu")
        return nd.dot(gate * nd.dot(X, self.w3.data(ctx)), self.w2.data(ctx))


class SwiGLUGateOnUp(SwiGLU):
    """The gate and the up projection swapped: silu on x @ w3, x @ w1 linear."""
    def forward(self, X):
        ctx = X.context
        b = nd.dot(X, self.w3.data(ctx))
        return nd.dot(nd.dot(X, self.w1.data(ctx)) * b * nd.sigmoid(b), self.w2.data(ctx))


class SwiGLUUpAttributeParameter(SwiGLU):
    """w3 a gluon.Parameter assigned as a plain attribute (the 2.0 style): on 1.9.1 it is not in
    collect_params(), so no Trainer sees it; the block initializes it itself."""
    def __init__(self, d, hidden, **kwargs):
        super().__init__(d, hidden, **kwargs)
        del self._reg_params["w3"]
        self.params._params.pop(self.params.prefix + "w3")
        self.w3 = gluon.Parameter("w3", shape=(d, hidden), init=init.Normal(d ** -0.5))
        self.w3.initialize()


MUTANTS = [
    Mutant("mxnet", "swiglu", f"{M}:SwiGLUGelu", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("mxnet", "swiglu", f"{M}:SwiGLUGateOnUp", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("mxnet", "swiglu", f"{M}:SwiGLUUpAttributeParameter", "parameters", "untracked attribute 'w3'",
           blocked=("compiled", "composition", "device_parity", "devices", "export", "gradients", "serialization",
                    "strict_loading", "values")),
]


# --- geglu -----------------------------------------------------------------------------------

class GeGLUSilu(SwiGLU):
    """SwiGLU where GeGLU is asked for: the bundled SwiGLU's silu gate kept."""


MUTANTS += [
    Mutant("mxnet", "geglu", f"{M}:GeGLUSilu", "values", "case 'random': mismatched elements", blocked=("gradients",)),
]
