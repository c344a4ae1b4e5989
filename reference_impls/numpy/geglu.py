"""GeGLU feed-forward block (Shazeer 2020): y = (gelu(x @ w1) * (x @ w3)) @ w2, the weights [in, out], with the
exact gelu a * Phi(a) (Phi the standard normal CDF, through erf), not its tanh approximation."""
import math

import numpy as np

from layer_conformance.reference_impls.numpy.swiglu import gated, gated_vjp

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(a):
    """gelu(a) = a Phi(a) and its derivative Phi(a) + a phi(a)."""
    cdf = 0.5 * (1.0 + _erf(a / math.sqrt(2.0)))
    return a * cdf, cdf + a * np.exp(-0.5 * a * a) / math.sqrt(2.0 * math.pi)


def forward(X, *, w1, w3, w2, **_):
    return gated(X, w1, w3, w2, gelu)


def vjp(g, X, *, w1, w3, w2, **_):
    return gated_vjp(g, X, w1, w3, w2, gelu)
