"""Linear y = W x + b with the hand-written VJP grad_W = g x^T, grad_x = W^T g, grad_b = g (003)."""
import numpy as np


def forward(W, x, b, **_):
    return W @ x + b


def vjp(g, W, x, b, **_):
    return {"W": np.outer(g, x), "x": W.T @ g, "b": g}


def hvp(g, v, W, x, b, **_):
    # d/d(W, x, b) of <g x^T, vW> + <W^T g, vx> + <g, vb>: only the bilinear W x term has a
    # second derivative
    return {"W": np.outer(g, v["x"]), "x": v["W"].T @ g, "b": np.zeros_like(b)}
