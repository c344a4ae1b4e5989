"""An RMSNorm reference whose vjp forgot the 1/d of the mean: dr/dX_k = -X_k r^3, not -X_k r^3 / d."""
import numpy as np

from layer_conformance.reference_impls.numpy.rmsnorm import forward  # noqa: F401  (the contract's forward, unchanged)


def vjp(g, X, *, gain, eps, **_):
    d = X.shape[-1]
    r = 1.0 / np.sqrt((X ** 2).mean(-1, keepdims=True) + eps)
    gg = g * gain
    dX = gg * r - X * r ** 3 * (gg * X).sum(-1, keepdims=True)
    dgain = (g * X * r).reshape(-1, d).sum(0)
    return {"X": dX, "gain": dgain}
