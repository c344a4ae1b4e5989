"""depth applications of h <- tanh(h @ w + b) (002, checkpoint): checkpointing changes what is
stored, never the values or the derivatives, so the reference simply does not checkpoint."""
import numpy as np


def forward(h, *, w, b, depth, **_):
    for _ in range(depth):
        h = np.tanh(h @ w + b)
    return h


def vjp(g, h, *, w, b, depth, **_):
    hs = [h]
    for _ in range(depth):
        hs.append(np.tanh(hs[-1] @ w + b))
    dw, db = np.zeros_like(w), np.zeros_like(b)
    for k in range(depth, 0, -1):
        dz = g * (1.0 - hs[k] ** 2)
        dw += hs[k - 1].reshape(-1, w.shape[0]).T @ dz.reshape(-1, w.shape[1])
        db += dz.reshape(-1, b.shape[0]).sum(0)
        g = dz @ w.T
    return {"h": g, "w": dw, "b": db}
