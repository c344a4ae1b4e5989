"""Layers whose failure in a dtype is the precision they compute at (layer_conformance.checks.precision): the source
chapter's RMSNorm with its statistic in the input's dtype, and one that computes float64 inputs in float32.
Nothing here creates an array at import time."""
import jax
import jax.numpy as jnp

from layer_conformance.reference_impls.jax.rmsnorm import RMSNorm as _RMSNorm
from tests.mutants.catalogue import Mutant
from tests.mutants.precision_causes import FLOAT32, NARROW

M = "tests.mutants.jax_precision"


class RMSNormChapter(_RMSNorm):
    """The source chapter's formula in NNX: the mean square in the input's own dtype."""
    def __call__(self, X):
        return self.gain[...].astype(X.dtype) * X * jax.lax.rsqrt(
            (X ** 2).mean(-1, keepdims=True) + jnp.asarray(self.eps, X.dtype))


class RMSNormFloat32Inside(_RMSNorm):
    """Computes in float32 whatever the input and casts back: float64 inputs get float32 precision."""
    def __call__(self, X):
        X32 = X.astype(jnp.float32)
        rms = jax.lax.rsqrt((X32 ** 2).mean(-1, keepdims=True) + self.eps)
        return (self.gain[...].astype(jnp.float32) * X32 * rms).astype(X.dtype)


MUTANTS = [
    Mutant("jax", "rmsnorm", f"{M}:RMSNormChapter", "values", NARROW.format(dtype="float16"), dtype="float16",
           blocked=("native", "gradients", "properties")),
    Mutant("jax", "rmsnorm", f"{M}:RMSNormFloat32Inside", "gradients", FLOAT32, dtype="float64"),
]
