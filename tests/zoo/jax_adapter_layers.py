"""JAX / Flax NNX implementations that tests/test_adapter_jax.py judges, by spec
(``tests.zoo.jax_adapter_layers:NAME``): its executors import them from here. Correct ones (RMSNormWithRngs,
Dropout, RMSNormBias, safe_norm) and ones that show one behaviour of the adapter each (a global switch left on,
a layer that does not trace, a numpy backward rule, a layer that raises).

Line numbers matter: test_adapter_jax.py finds the lines its messages name with inspect, so a layer may move
within this file, but a message must keep naming this file's line of the layer's own code."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from layer_conformance.reference_impls.jax.rmsnorm import RMSNorm


class RMSNormWithRngs(nnx.Module):
    """A constructor that needs rngs (the contract cannot name them), and RNG state that is not saved."""
    def __init__(self, d, eps=1e-6, *, rngs):
        self.gain = nnx.Param(jnp.ones(d))
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.eps = eps

    def __call__(self, X):
        return self.drop(self.gain[...] * X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps))


class Dropout(nnx.Module):
    """Dropout from scratch that follows NNX's switch: Module.eval() sets `deterministic`."""
    def __init__(self, p, *, rngs):
        self.p, self.deterministic, self.rngs = p, False, rngs

    def __call__(self, X):
        if self.deterministic:
            return X
        keep = jax.random.bernoulli(self.rngs.dropout(), 1 - self.p, X.shape)
        return jnp.where(keep, X / (1 - self.p), 0.0)


class RMSNormBias(nnx.Module):
    def __init__(self, d, eps=1e-6, bias=True):
        self.gain = nnx.Param(jnp.ones(d))
        self.bias = nnx.Param(jnp.zeros(d)) if bias else None
        self.eps = eps

    def __call__(self, X):
        y = self.gain[...] * X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
        return y if self.bias is None else y + self.bias[...]


@jax.custom_jvp
def safe_norm(x):
    return jnp.sqrt(jnp.sum(x ** 2))


@safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = safe_norm(x)
    return n, jnp.sum(x * t) / jnp.where(n == 0, 1.0, n)


class SwitchesX64On(RMSNorm):
    def __call__(self, X):
        jax.config.update("jax_enable_x64", True)  # a global switch a layer must not leave behind
        return super().__call__(X)


# -- compiled calls: the adapter traces and compiles whole calls, and runs eagerly what does not trace ------
class BranchesOnValues(RMSNorm):
    """Python control flow on a value: not traceable, correct when run eagerly."""
    def __call__(self, X):
        if float(X.sum()) > -1e30:
            return super().__call__(X)
        return X


@jax.custom_vjp
def log1pexp_numpy_bwd(x):
    return jnp.logaddexp(x, 0.0)


def _numpy_bwd(x, g):
    # right first-order values, but numpy: grad of grad cannot differentiate through it
    return (jnp.asarray(np.asarray(g) / (1.0 + np.exp(-np.asarray(x)))),)


log1pexp_numpy_bwd.defvjp(lambda x: (log1pexp_numpy_bwd(x), x), _numpy_bwd)


class RaisesOnPositiveSum(RMSNorm):
    def __call__(self, X):
        if float(X.sum()) > -1e30:
            raise ValueError("refused by the layer")
        return X
