"""Broken Flax NNX layers under jax.jit, each caught by the ``compiled`` check.

Nothing here creates an array at import time (see jax_mutants.py)."""
import jax
import jax.numpy as jnp
from flax import nnx

from tests.mutants.catalogue import Mutant


class RMSNormCallCounter(nnx.Module):
    """Warms its gain up over the first calls, counting calls in a plain Python attribute: eagerly the
    count moves on every call, under jit it is a constant baked in when the program was traced."""
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps
        self.calls = 0

    def __call__(self, X):
        self.calls += 1
        warm = min(1.0, 0.5 + 0.1 * self.calls)
        return warm * self.gain[...] * X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)


class RMSNormArrayPath(nnx.Module):
    """Takes a hand-written path when its input is an array rather than a tracer, and that path forgets
    the square root. Every harness call traces, so only an op-by-op eager run ever takes it."""
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        mean_square = (X ** 2).mean(-1, keepdims=True) + self.eps
        if isinstance(X, jax.core.Tracer):
            return self.gain[...] * X / jnp.sqrt(mean_square)
        return self.gain[...] * X / mean_square


M = "tests.mutants.jax_compiled"
MUTANTS = [
    Mutant("jax", "rmsnorm", f"{M}:RMSNormCallCounter", "compiled", "the layer has a Python side effect",
           also=('export', 'values', 'batching', 'abstract'), blocked=('device_parity', 'gradients', 'native', 'properties')),
    Mutant("jax", "rmsnorm", f"{M}:RMSNormArrayPath", "compiled", "takes another path when its inputs are traced"),
]
