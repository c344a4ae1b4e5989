import jax.numpy as jnp
from flax import nnx


class RMSNorm(nnx.Module):
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = X.astype(jnp.float32) if X.dtype in (jnp.float16, jnp.bfloat16) else X
        rms = jnp.sqrt((X32 ** 2).mean(-1, keepdims=True) + self.eps)
        return self.gain[...] * (X32 / rms).astype(X.dtype)


IMPL = RMSNorm
