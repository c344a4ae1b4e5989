"""swiglu's Flax NNX mutants: the bundled SwiGLU module (nnx.Param weights [in, out]) with one mistake each."""
import jax

from layer_conformance.reference_impls.jax.swiglu import SwiGLU
from tests.mutants.catalogue import Mutant

M = "tests.mutants.jax_swiglu"


class SwiGLUGelu(SwiGLU):
    """GeGLU where SwiGLU is asked for: the exact gelu gates the w1 branch instead of silu."""
    def __call__(self, X):
        return (jax.nn.gelu(X @ self.w1[...], approximate=False) * (X @ self.w3[...])) @ self.w2[...]


class SwiGLUGateOnUp(SwiGLU):
    """The gate and the up projection swapped: silu on x @ w3, x @ w1 linear."""
    def __call__(self, X):
        return ((X @ self.w1[...]) * jax.nn.silu(X @ self.w3[...])) @ self.w2[...]


class SwiGLUUpRawArray(SwiGLU):
    """w3 a raw jax array, not an nnx.Param: nnx.grad and nnx.Optimizer skip it."""
    def __init__(self, d, hidden, rngs):
        super().__init__(d, hidden, rngs)
        self.w3 = self.w3[...]

    def __call__(self, X):
        return (jax.nn.silu(X @ self.w1[...]) * (X @ self.w3)) @ self.w2[...]


MUTANTS = [
    Mutant("jax", "swiglu", f"{M}:SwiGLUGelu", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("jax", "swiglu", f"{M}:SwiGLUGateOnUp", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("jax", "swiglu", f"{M}:SwiGLUUpRawArray", "parameters", "untracked attribute 'w3'",
           blocked=("compiled", "composition", "devices", "export", "gradients", "serialization", "values")),
]


# --- geglu -----------------------------------------------------------------------------------

class GeGLUDefaultGelu(SwiGLU):
    """jax.nn.gelu at its default, approximate=True: the tanh approximation, not the exact gelu asked for."""
    def __call__(self, X):
        return (jax.nn.gelu(X @ self.w1[...]) * (X @ self.w3[...])) @ self.w2[...]


MUTANTS += [
    Mutant("jax", "geglu", f"{M}:GeGLUDefaultGelu", "values", "mismatched elements", blocked=("gradients",)),
]
