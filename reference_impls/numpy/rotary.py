"""Rotary position embedding (RoPE, Su et al. 2021), the rotate_half pairing (Llama, GPT-NeoX): X [..., seq,
head_dim]; feature i (i < head_dim/2) and feature i + head_dim/2 of position p are rotated by the angle
p * base^(-2i/head_dim), positions 0..seq-1. Angles and rotation in float64."""
import numpy as np


def _cos_sin(seq, head_dim, base):
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(seq, dtype=np.float64)[:, None] * inv_freq[None, :]   # [seq, head_dim/2]
    angles = np.concatenate([angles, angles], -1)                            # the two halves share an angle
    return np.cos(angles), np.sin(angles)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], -1)


def forward(X, *, head_dim, base, **_):
    cos, sin = _cos_sin(X.shape[-2], head_dim, base)
    return X * cos + _rotate_half(X) * sin


def vjp(g, X, *, head_dim, base, **_):
    # the rotation is orthogonal: its transpose is the inverse rotation; rotate_half's transpose is -rotate_half
    cos, sin = _cos_sin(X.shape[-2], head_dim, base)
    return {"X": g * cos - _rotate_half(g * sin)}
