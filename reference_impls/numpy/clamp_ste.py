"""Clamp with a custom gradient (000 ex. 3): forward clip(X, lo, hi); backward passes the gradient
only where lo < X < hi strictly (zero at and beyond the boundary); lo and hi get none."""
import numpy as np


def forward(X, lo, hi, **_):
    return np.clip(X, lo, hi)


def vjp(g, X, lo, hi, **_):
    return {"X": g * ((X > lo) & (X < hi))}
