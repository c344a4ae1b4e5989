"""JAX layers that run but cannot be exported (the export check)."""
import jax
import jax.numpy as jnp
import numpy as np

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


MUTANTS = [
    Mutant("jax", "log1pexp", "tests.mutants.jax_export:log1pexp_numpy_backward", "export",
           "a host callback (jax.pure_callback", also=('second_order',)),
]
