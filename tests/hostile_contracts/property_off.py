"""An RMSNorm reference 1 % too large: its vjp is the true derivative of its own forward, so only the
declared property (mean square m2 / (m2 + eps) at gain one) tells."""
from layer_conformance.reference_impls.numpy import rmsnorm


def forward(X, **kw):
    return 1.01 * rmsnorm.forward(X, **kw)


def vjp(g, X, **kw):
    return rmsnorm.vjp(1.01 * g, X, **kw)
