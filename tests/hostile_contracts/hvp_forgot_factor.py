"""Linear W x + b whose Hessian-vector product doubles the W term: vjp and forward agree, hvp does not."""
import numpy as np

from layer_conformance.reference_impls.numpy.linear_vjp import forward, vjp  # noqa: F401  (unchanged)


def hvp(g, v, W, x, b, **_):
    return {"W": 2 * np.outer(g, v["x"]), "x": v["W"].T @ g, "b": np.zeros_like(b)}
