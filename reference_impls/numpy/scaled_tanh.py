"""tanh with a halved gradient: forward tanh(x), backward 0.5 * g * (1 - tanh(x)^2) (004)."""
import numpy as np


def forward(x, **_):
    return np.tanh(x)


def vjp(g, x, **_):
    y = np.tanh(x)
    return {"x": 0.5 * g * (1.0 - y ** 2)}
