"""Correct Flax NNX modules that compute at a fixed precision (tests/test_zoo.py)."""
import jax
import jax.numpy as jnp
from flax import nnx


class RMSNormUpcast(nnx.Module):
    """Normalizes in float32 whatever the input's dtype, casts back, then scales."""
    def __init__(self, d, eps=1e-6):
        self.weight = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        x = X.astype(jnp.float32)
        x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return self.weight[...] * x.astype(X.dtype)


class RMSNormFloat32(nnx.Module):
    """Everything, the gain included, in float32; the result in the input's dtype."""
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        x = X.astype(jnp.float32)
        y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.gain[...].astype(jnp.float32)
        return y.astype(X.dtype)
