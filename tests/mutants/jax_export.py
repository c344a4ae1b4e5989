"""JAX layers that run but cannot be exported (the export check)."""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tests.mutants.catalogue import Mutant


@jax.custom_vjp
def log1pexp_numpy_backward(x):
    return jnp.logaddexp(x, 0.0)


def _fwd(x):
    return log1pexp_numpy_backward(x), x


def _bwd(x, g):
    # the backward computed in numpy through a host callback: right values, but not serializable
    sig = jax.pure_callback(lambda a: (1.0 / (1.0 + np.exp(-a))).astype(a.dtype),
                            jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return (g * sig,)


log1pexp_numpy_backward.defvjp(_fwd, _bwd)


def _rms(X, eps):
    return X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + eps)


class LambdaAttribute(nnx.Module):
    """An activation kept as a lambda attribute: static in the graph definition, which cannot be pickled."""
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps
        self.post = lambda t: t  # noqa: E731

    def __call__(self, X):
        return self.post(self.gain[...] * _rms(X, self.eps))


_EPS = 1e-5  # the default, for every instance: a module-level setting


class EpsAsGlobal(nnx.Module):
    """Writes eps into a module-level setting that every instance reads: neither its state nor its graph
    definition holds it, so a process that merges a saved one without constructing one has the default."""
    def __init__(self, d, eps=1e-6):
        global _EPS
        self.gain = nnx.Param(jnp.ones(d))
        _EPS = eps

    def __call__(self, X):
        return self.gain[...] * _rms(X, _EPS)


MUTANTS = [
    Mutant("jax", "log1pexp", "tests.mutants.jax_export:log1pexp_numpy_backward", "export",
           "a host callback (jax.pure_callback", also=('second_order', 'batching')),
    Mutant("jax", "rmsnorm", "tests.mutants.jax_export:LambdaAttribute", "export",
           "every static attribute of the module"),
    Mutant("jax", "rmsnorm", "tests.mutants.jax_export:EpsAsGlobal", "export",
           "outside the module's state and graph definition"),
]
