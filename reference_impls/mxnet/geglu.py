import math

from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402

from layer_conformance.reference_impls.mxnet.swiglu import SwiGLU  # noqa: E402


def _const(value, like):
    # an array of like's dtype: MXNet 1.9.1 holds a Python scalar operand in float32
    return nd.full((1,), value, ctx=like.context, dtype=like.dtype)


class _Gelu(autograd.Function):
    """The exact gelu a Phi(a), its derivative Phi(a) + a phi(a) written out: nd.erf's backward holds 2/sqrt(pi) in
    float32 (3e-8 off in float64), and LeakyReLU(act_type='gelu') is 1.7e-5 off in float64."""

    def forward(self, a):
        cdf = 0.5 * (1.0 + nd.erf(nd.broadcast_mul(a, _const(1.0 / math.sqrt(2.0), a))))
        self.save_for_backward(a, cdf)
        return a * cdf

    def backward(self, g):
        a, cdf = self.saved_tensors
        pdf = nd.broadcast_mul(nd.exp(-0.5 * a * a), _const(1.0 / math.sqrt(2.0 * math.pi), a))
        return g * (cdf + a * pdf)


class GeGLU(SwiGLU):
    @staticmethod
    def gate(a):
        # a Function is single-use: a fresh one per call
        return _Gelu()(a)


IMPL = GeGLU
