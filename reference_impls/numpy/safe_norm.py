"""safe_norm(x) = sqrt(sum(x^2)) with the convention that its derivative at 0 is 0 (002, custom_jvp):
the JVP is sum(x * t) / where(norm == 0, 1, norm), so the gradient is x / that."""
import numpy as np


def forward(x, **_):
    return np.sqrt(np.sum(x * x))


def vjp(g, x, **_):
    n = np.sqrt(np.sum(x * x))
    return {"x": g * x / (1.0 if n == 0 else n)}


def hvp(g, v, x, **_):
    # d/dx <g x / n, v> = g (v / n - x (x . v) / n^3) away from 0; at 0 the rule's x / 1
    # (the where picks the constant) has derivative g v
    n = np.sqrt(np.sum(x * x))
    t = v["x"]
    if n == 0:
        return {"x": g * t}
    return {"x": g * (t / n - x * np.sum(x * t) / n ** 3)}
