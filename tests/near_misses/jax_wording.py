"""JAX / Flax NNX layers and functions for tests/test_hints.py whose hints must speak JAX's words (no array at
import time: see tests/mutants/jax_mutants.py)."""
import jax
import jax.numpy as jnp
from flax import nnx


class RowLoop(nnx.Module):
    """RMSNorm that normalizes row by row in a Python loop over range(X.shape[0]): right eagerly, but under
    jax.export with a symbolic batch the number of rows is not a Python int, so there is nothing to loop over."""
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, X):
        rows = [X[i] / jnp.sqrt((X[i] ** 2).mean(-1, keepdims=True) + self.eps) for i in range(X.shape[0])]
        return self.gain[...] * jnp.stack(rows)


@jax.custom_vjp
def log1pexp_naive(x):
    """log(1 + exp(x)) as it reads, with the stable rule: exp(x) overflows float16 beyond x = 11."""
    return jnp.log1p(jnp.exp(x))


def _fwd(x):
    return log1pexp_naive(x), x


def _bwd(x, g):
    return (g * jax.nn.sigmoid(x),)


log1pexp_naive.defvjp(_fwd, _bwd)
