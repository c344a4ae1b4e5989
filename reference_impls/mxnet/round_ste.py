from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd  # noqa: E402


class RoundSTE(autograd.Function):
    """Single-use, like every autograd.Function: apply a fresh one per call, RoundSTE()(X)."""

    def forward(self, X):
        # nd.round rounds halves away from zero; the numpy-semantics round is half to even.
        # It has no float16 kernel: round in float32 and back, exact (every float16 is a float32, and
        # a rounded float16 is an integer float16 holds)
        wide = X.astype("float32") if X.dtype == np.float16 else X
        return mx.np.round(wide.as_np_ndarray()).as_nd_ndarray().astype(X.dtype)

    def backward(self, grad_output):
        # Pretend forward was the identity: pass the gradient straight through
        return grad_output


IMPL = RoundSTE
