import jax
import jax.numpy as jnp
from flax import nnx


class LayerNorm(nnx.Module):
    def __init__(self, d, eps=1e-5):
        self.gain = nnx.Param(jnp.ones(d))
        self.bias = nnx.Param(jnp.zeros(d))
        self.eps = eps

    def __call__(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.astype(jnp.float32) if X.dtype in (jnp.float16, jnp.bfloat16) else X
        Xc = X32 - X32.mean(-1, keepdims=True)
        # two passes: the mean first, then the mean square of the centred values (no E[x^2] - E[x]^2)
        var = (Xc ** 2).mean(-1, keepdims=True)
        Y = (Xc * jax.lax.rsqrt(var + self.eps)).astype(X.dtype)
        return self.gain[...] * Y + self.bias[...]


IMPL = LayerNorm
