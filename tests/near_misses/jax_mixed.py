"""A flax NNX layer that follows the mixed-precision convention: params in param_dtype, computed in dtype."""
import jax.numpy as jnp
from flax import nnx


class RMSNormMixed(nnx.Module):
    def __init__(self, d, eps=1e-6, *, dtype=None, param_dtype=jnp.float32):
        self.gain = nnx.Param(jnp.ones(d, dtype=param_dtype))
        self.eps, self.dtype = eps, dtype

    def __call__(self, X):
        X = X.astype(self.dtype) if self.dtype is not None else X
        rms = jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
        return self.gain[...].astype(X.dtype) * X / rms
