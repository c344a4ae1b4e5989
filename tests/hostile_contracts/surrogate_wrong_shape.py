"""A straight-through sign whose declared surrogate sums the cotangent over the last axis: a gradient of
the wrong shape."""
import numpy as np


def forward(x, **_):
    return np.sign(x)


def vjp(g, x, **_):
    return {"x": g.sum(-1)}
