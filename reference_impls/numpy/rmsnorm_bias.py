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
    """This reference with mean(x^2) summed one term at a time in ``dtype`` (a running sum, as a hand-written
    kernel keeps it), the rest in float64: what a layer that accumulates its statistic in a 16-bit dtype gives.
    A contract that declares ``accumulate`` names that mistake where a layer's outputs match this."""
    if dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    dtype = np.dtype(dtype)
    x = np.asarray(X).astype(dtype)
    total = np.add.accumulate(x * x, axis=-1, dtype=dtype)[..., -1:]
    ms = (total / dtype.type(x.shape[-1])).astype(np.float64)
    X64 = np.asarray(X, dtype=np.float64)
    y = X64 / np.sqrt(ms + eps) * gain
    return y if bias is None or isinstance(bias, bool) else y + bias
