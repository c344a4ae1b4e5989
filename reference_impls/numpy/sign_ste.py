"""Straight-through sign: forward sign(x), backward the identity (004, sign STE)."""
import numpy as np


def forward(x, **_):
    return np.sign(x)  # sign(0) = 0, as tf.sign, torch.sign and jnp.sign


def vjp(g, x, **_):
    # the declared surrogate: pass the upstream gradient straight through
    return {"x": g}
