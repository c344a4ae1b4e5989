"""SwiGLU feed-forward block (Shazeer 2020): y = (silu(x @ w1) * (x @ w3)) @ w2, the weights [in, out].
silu(a) = a * sigmoid(a) gates the up projection x @ w3; w2 projects the hidden width back to d. ``gated`` and
``gated_vjp`` take the gate's activation (its value and derivative), for the GLU variants (geglu)."""
import numpy as np


def _sigmoid(a):
    # exp of a non-positive argument only: no overflow at any scale
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(a):
    """silu(a) and its derivative s + a s (1 - s), s = sigmoid(a)."""
    s = _sigmoid(a)
    return a * s, s + a * s * (1.0 - s)


def gated(X, w1, w3, w2, act):
    a, b = X @ w1, X @ w3
    return (act(a)[0] * b) @ w2


def gated_vjp(g, X, w1, w3, w2, act):
    a, b = X @ w1, X @ w3
    f, df = act(a)
    dh = g @ w2.T
    da, db = dh * b * df, dh * f
    rows = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731 (a batch of any rank, flattened)
    return {"X": da @ w1.T + db @ w3.T,
            "w1": rows(X).T @ rows(da), "w3": rows(X).T @ rows(db), "w2": rows(f * b).T @ rows(g)}


def forward(X, *, w1, w3, w2, **_):
    return gated(X, w1, w3, w2, silu)


def vjp(g, X, *, w1, w3, w2, **_):
    return gated_vjp(g, X, w1, w3, w2, silu)
