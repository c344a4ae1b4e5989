"""JAX / Flax NNX layers for tests/test_hints.py (no array at import time: see tests/mutants/jax_mutants.py)."""
import jax.numpy as jnp
from flax import nnx


class Buffer(nnx.Variable):
    pass


class GainAsBuffer(nnx.Module):
    """The gain held in a non-Param Variable: saved, but nnx.grad(wrt=nnx.Param) never trains it."""
    def __init__(self, d, eps=1e-6):
        self.gain = Buffer(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        return self.gain[...] * X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
