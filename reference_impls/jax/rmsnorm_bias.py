import jax.numpy as jnp
from flax import nnx


class RMSNorm(nnx.Module):
    def __init__(self, d, eps=1e-6, bias=False):
        self.gain = nnx.Param(jnp.ones(d))
        # None means "no bias": no Variable, so nothing in nnx.state and nothing saved
        self.bias = nnx.Param(jnp.zeros(d)) if bias else None
        self.eps = eps

    def __call__(self, X):
        rms = jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
        Y = self.gain[...] * X / rms
        return Y if self.bias is None else Y + self.bias[...]


IMPL = RMSNorm
