"""CausalMask: scores with the strict upper triangle set to -inf (000, 5.4.3)."""
import numpy as np


def init_mask(max_len, **_):
    return np.triu(np.ones((max_len, max_len), dtype=bool), 1)


def forward(scores, *, mask, **_):
    T = scores.shape[-1]
    return np.where(mask[:T, :T], -np.inf, scores)


def vjp(g, scores, *, mask, **_):
    T = scores.shape[-1]
    return {"scores": np.where(mask[:T, :T], 0.0, g)}
