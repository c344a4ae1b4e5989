import jax.numpy as jnp
from flax import nnx


class Buffer(nnx.Variable):
    """Non-trainable state: saved and moved with the module, skipped by nnx.Param filters."""


class CausalMask(nnx.Module):
    def __init__(self, max_len):
        # Precompute once for the longest sequence; slice per call
        self.mask = Buffer(jnp.triu(jnp.ones((max_len, max_len), dtype=bool), 1))

    def __call__(self, scores):
        T = scores.shape[-1]
        return jnp.where(self.mask[:T, :T], -jnp.inf, scores)


IMPL = CausalMask
