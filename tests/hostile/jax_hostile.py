"""A hostile JAX layer: switches on 64-bit mode for the whole process, then behaves."""
import jax
import jax.numpy as jnp
from flax import nnx


class EnablesX64(nnx.Module):
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        jax.config.update("jax_enable_x64", True)
        return self.gain[...] * X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
