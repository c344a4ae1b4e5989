"""RMSNorm: x / sqrt(mean(x^2, -1) + eps) * gain (000, 5.4.2)."""
import numpy as np


def forward(X, *, gain, eps, **_):
    r = 1.0 / np.sqrt((X ** 2).mean(-1, keepdims=True) + eps)
    return X * r * gain


def vjp(g, X, *, gain, eps, **_):
    d = X.shape[-1]
    r = 1.0 / np.sqrt((X ** 2).mean(-1, keepdims=True) + eps)
    gg = g * gain
    # y = gain * X * r(X); dr/dX_k = -X_k r^3 / d
    dX = gg * r - X * r ** 3 * (gg * X).sum(-1, keepdims=True) / d
    dgain = (g * X * r).reshape(-1, d).sum(0)
    return {"X": dX, "gain": dgain}
