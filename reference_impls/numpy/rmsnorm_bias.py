"""RMSNorm with an optional learned bias after the scale (000 ex. 1):
x / sqrt(mean(x^2, -1) + eps) * gain + bias."""
import numpy as np


def forward(X, *, gain, eps, bias=None, **_):
    r = 1.0 / np.sqrt((X ** 2).mean(-1, keepdims=True) + eps)
    y = X * r * gain
    return y if bias is None or isinstance(bias, bool) else y + bias


def vjp(g, X, *, gain, eps, bias=None, **_):
    d = X.shape[-1]
    r = 1.0 / np.sqrt((X ** 2).mean(-1, keepdims=True) + eps)
    gg = g * gain
    dX = gg * r - X * r ** 3 * (gg * X).sum(-1, keepdims=True) / d
    out = {"X": dX, "gain": (g * X * r).reshape(-1, d).sum(0)}
    if bias is not None and not isinstance(bias, bool):
        out["bias"] = g.reshape(-1, d).sum(0)
    return out


def accumulated_in(X, *, dtype, gain, eps, bias=None, **_):
    """This reference with mean(x^2) summed in ``dtype`` (rmsnorm's ``accumulated_in``), then the bias."""
    from .rmsnorm import accumulated_in as scaled
    y = scaled(X, dtype=dtype, gain=gain, eps=eps)
    return y if bias is None or isinstance(bias, bool) else y + bias
