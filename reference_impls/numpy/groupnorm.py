"""GroupNorm, channels first: X [N, C, ...] in `groups` groups of consecutive channels, each example's group
normalized over its channels and positions (biased variance), then a per-channel gain and bias."""
import numpy as np


def _grouped(X, groups, eps):
    """x-hat in the grouped shape [N, G, C/G, ...], and 1/sqrt(var + eps) per (example, group)."""
    N, C = X.shape[:2]
    Xg = X.reshape(N, groups, C // groups, *X.shape[2:])
    axes = tuple(range(2, Xg.ndim))
    xc = Xg - Xg.mean(axes, keepdims=True)
    r = 1.0 / np.sqrt((xc ** 2).mean(axes, keepdims=True) + eps)
    return xc * r, r, axes


def _per_channel(v, X):
    return v.reshape((1, -1) + (1,) * (X.ndim - 2))


def forward(X, *, gain, bias, groups, eps, **_):
    xhat, _, _ = _grouped(X, groups, eps)
    return xhat.reshape(X.shape) * _per_channel(gain, X) + _per_channel(bias, X)


def vjp(g, X, *, gain, bias, groups, eps, **_):
    xhat, r, axes = _grouped(X, groups, eps)
    gg = (g * _per_channel(gain, X)).reshape(xhat.shape)
    dX = r * (gg - gg.mean(axes, keepdims=True) - xhat * (gg * xhat).mean(axes, keepdims=True))
    other = tuple(a for a in range(X.ndim) if a != 1)
    return {"X": dX.reshape(X.shape), "gain": (g * xhat.reshape(X.shape)).sum(other), "bias": g.sum(other)}
