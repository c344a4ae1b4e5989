"""SwiGLU feed-forward block (Shazeer 2020): y = (silu(x @ w1) * (x @ w3)) @ w2, the weights [in, out].
silu(a) = a * sigmoid(a) gates the up projection x @ w3; w2 projects the hidden width back to d."""
import numpy as np


def _sigmoid(a):
    # exp of a non-positive argument only: no overflow at any scale
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _hidden(X, w1, w3):
    a, b = X @ w1, X @ w3
    s = _sigmoid(a)
    return a, b, s, a * s * b


def forward(X, *, w1, w3, w2, **_):
    return _hidden(X, w1, w3)[3] @ w2


def vjp(g, X, *, w1, w3, w2, **_):
    a, b, s, h = _hidden(X, w1, w3)
    dh = g @ w2.T
    # silu'(a) = s + a s (1 - s)
    da = dh * b * (s + a * s * (1.0 - s))
    db = dh * a * s
    rows = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731 (a batch of any rank, flattened)
    return {"X": da @ w1.T + db @ w3.T,
            "w1": rows(X).T @ rows(da), "w3": rows(X).T @ rows(db), "w2": rows(h).T @ rows(g)}
