"""An RMSNorm reference whose vjp forgets the trainable slot 'gain'."""
from layer_conformance.reference_impls.numpy.rmsnorm import forward, vjp as _vjp


def vjp(g, X, **kw):
    grads = _vjp(g, X, **kw)
    grads.pop("gain")
    return grads
