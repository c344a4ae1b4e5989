"""Straight-through round: forward round(w), backward the identity (000, 5.4.4)."""
import numpy as np


def forward(w, **_):
    return np.round(w)  # round half to even, as torch.round, tf.round and jnp.round


def vjp(g, w, **_):
    # the declared surrogate: pretend forward was the identity
    return {"w": g}
