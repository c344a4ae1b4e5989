from harness.adapters.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
import mxnet as mx  # noqa: E402
from mxnet import autograd  # noqa: E402


class RoundSTE(autograd.Function):
    """Single-use, like every autograd.Function: apply a fresh one per call, RoundSTE()(X)."""

    def forward(self, X):
        # nd.round rounds halves away from zero; the numpy-semantics round is half to even
        return mx.np.round(X.as_np_ndarray()).as_nd_ndarray()

    def backward(self, grad_output):
        # Pretend forward was the identity: pass the gradient straight through
        return grad_output


IMPL = RoundSTE
