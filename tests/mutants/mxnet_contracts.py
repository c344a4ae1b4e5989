"""Broken MXNet Gluon 1.9.1 implementations of the custom-function and exercise contracts, each
breaking the contract's characteristic property; tests/test_mutants.py runs them."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
import numpy as np  # noqa: E402
from mxnet import autograd, init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

from layer_conformance.reference_impls.mxnet.causal_mask import CausalMask  # noqa: E402
from layer_conformance.reference_impls.mxnet.gradient_reversal import _ReverseBy  # noqa: E402
from layer_conformance.reference_impls.mxnet.rmsnorm import RMSNorm as _RMSNorm  # noqa: E402
from layer_conformance.reference_impls.mxnet.rmsnorm_bias import RMSNorm as _RMSNormBias  # noqa: E402
from layer_conformance.reference_impls.mxnet.softmax_cross_entropy import \
    SoftmaxCrossEntropy as _SoftmaxCrossEntropy  # noqa: E402
from tests.mutants.base_mxnet import Dropout, RMSNorm  # noqa: E402
from tests.mutants.catalogue import Mutant  # noqa: E402


# --- sign_ste, clipped_relu_grad, scaled_tanh ------------------------------------------------

def sign_plain(x):
    """No custom rule: sign's true gradient is zero, so nothing passes straight through."""
    return nd.sign(x)


class SignHardtanhSTE(autograd.Function):
    """A different estimator: the gradient only where |x| <= 1 (hardtanh STE), not the identity."""
    def forward(self, x):
        self.save_for_backward(x)
        return nd.sign(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * (nd.abs(x) <= 1)


class ClippedReLUNoClip(autograd.Function):
    """The ReLU gradient without the clipping."""
    def forward(self, x):
        self.save_for_backward(x)
        return nd.relu(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * (x > 0)


class ClippedReLUGradAtZero(autograd.Function):
    """x >= 0 instead of x > 0: a gradient passes at exactly zero."""
    def forward(self, x):
        self.save_for_backward(x)
        return nd.relu(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return nd.clip(g * (x >= 0), -1.0, 1.0)


class ScaledTanhUnscaled(autograd.Function):
    """Forgets the 0.5: tanh's true gradient."""
    def forward(self, x):
        y = nd.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved_tensors
        return g * (1 - y * y)


# --- log1pexp, scaled ----------------------------------------------------------------------

def log1pexp_plain_autodiff(x):
    """The formula without the custom rule: autodiff divides inf by inf at x = 1000 (NaN)."""
    return nd.log(1.0 + nd.exp(x))


class Log1pExpNaiveBackward(autograd.Function):
    """A stable forward, but the backward rule writes the derivative as exp(x) / (1 + exp(x))."""
    def forward(self, x):
        self.save_for_backward(x)
        return nd.relu(x) + nd.log1p(nd.exp(-nd.abs(x)))

    def backward(self, g):
        (x,) = self.saved_tensors
        return g * nd.exp(x) / (1 + nd.exp(x))


class _ScaledBy(autograd.Function):
    def __init__(self, k):
        super().__init__()
        self.k = k


class _ScaledForgetsK(_ScaledBy):
    def forward(self, x):
        return self.k * x

    def backward(self, g):
        return g


def scaled_forgets_k(k, x):
    """Passes g through unscaled."""
    return _ScaledForgetsK(k.asscalar().item())(x)


class ScaledKAsInput(autograd.Function):
    """The straight port of torch's Function: k as forward's first input, backward returning zeros
    for it. Right on paper; but k has no gradient buffer, and 1.9.1 then writes no gradient for any
    input after it, so x's is silently dropped."""
    def forward(self, k, x):
        self.save_for_backward(k)
        return k * x

    def backward(self, g):
        (k,) = self.saved_tensors
        return nd.zeros_like(k), k * g


class _ScaledGradForK(autograd.Function):
    def forward(self, x, k):
        self.save_for_backward(x, k)
        return k * x

    def backward(self, g):
        x, k = self.saved_tensors
        return k * g, (g * x).sum()


def scaled_grad_for_k(k, x):
    """Hands k to forward (after x, so x's gradient survives) and returns the true derivative for
    it instead of zero: a setting that would learn."""
    return _ScaledGradForK()(x, k)


# --- linear_vjp, softmax_cross_entropy ------------------------------------------------------

class LinearNoBiasGrad(autograd.Function):
    """Returns zeros for b (backward must return an array per input): the bias never learns."""
    def forward(self, W, x, b):
        self.save_for_backward(W, x)
        return nd.dot(W, x) + b

    def backward(self, g):
        W, x = self.saved_tensors
        return nd.dot(g.reshape((-1, 1)), x.reshape((1, -1))), nd.dot(W, g, transpose_a=True), nd.zeros_like(g)


class LinearUntransposed(autograd.Function):
    """W g instead of W^T g: same shape for a square W, wrong numbers."""
    def forward(self, W, x, b):
        self.save_for_backward(W, x)
        return nd.dot(W, x) + b

    def backward(self, g):
        W, x = self.saved_tensors
        return nd.dot(g.reshape((-1, 1)), x.reshape((1, -1))), nd.dot(W, g), g


def softmax_ce_naive(logits, labels):
    """exp without the max shift: exp(1e4) = inf, inf / inf = NaN."""
    p = nd.exp(logits) / nd.exp(logits).sum(axis=-1, keepdims=True)
    return -(labels * nd.log(p)).sum(axis=-1)


class SoftmaxCEGradToLabels(_SoftmaxCrossEntropy):
    """Returns -g log p for the labels instead of zero."""
    def backward(self, g):
        log_p, labels = self.saved_tensors
        g = g.expand_dims(-1)
        return g * (nd.exp(log_p) - labels), -g * log_p


class SoftmaxCEMissingY(_SoftmaxCrossEntropy):
    """Returns p instead of p - y."""
    def backward(self, g):
        log_p, labels = self.saved_tensors
        return g.expand_dims(-1) * nd.exp(log_p), nd.zeros_like(labels)


# --- clamp_ste ------------------------------------------------------------------------------

class _Clamp(autograd.Function):
    def forward(self, X, lo, hi):
        self.save_for_backward(X, lo, hi)
        return nd.clip(X, lo.asscalar().item(), hi.asscalar().item())


class ClampSTEInclusive(_Clamp):
    """lo <= X <= hi: passes the gradient on the boundary, as the native clamp does."""
    def backward(self, g):
        X, lo, hi = self.saved_tensors
        inside = nd.broadcast_greater_equal(X, lo) * nd.broadcast_lesser_equal(X, hi)
        return g * inside, nd.zeros_like(lo), nd.zeros_like(hi)


class ClampSTEGradToBounds(_Clamp):
    """Also returns gradients for the bounds lo and hi, which the contract says get none."""
    def backward(self, g):
        X, lo, hi = self.saved_tensors
        inside = nd.broadcast_greater(X, lo) * nd.broadcast_lesser(X, hi)
        below, above = nd.broadcast_lesser_equal(X, lo), nd.broadcast_greater_equal(X, hi)
        return g * inside, (g * below).sum(), (g * above).sum()


# --- rmsnorm_bias ----------------------------------------------------------------------------

class BiasAlwaysCreated(RMSNorm):
    """Creates the bias whatever the flag says (and only uses it when asked): the saved state
    does not change shape, so a bias-free checkpoint is indistinguishable."""
    def __init__(self, d, eps=1e-6, bias=False, **kwargs):
        super().__init__(d, eps, **kwargs)
        with self.name_scope():
            self.bias = self.params.get('bias', shape=(d,), init=init.Zero())
        self.use_bias = bias

    def forward(self, X):
        Y = super().forward(X)
        return Y + self.bias.data(X.context) if self.use_bias else Y


class BiasTolerantLoad(_RMSNormBias):
    """"Backward compatibility": always loads with allow_missing=True, so a checkpoint saved
    without the bias loads silently (the bias keeps its initial zeros) even when asked strictly."""
    def load_parameters(self, filename, ctx=None, allow_missing=False, **kwargs):
        super().load_parameters(filename, ctx=ctx, allow_missing=True, **kwargs)


class BiasBeforeScale(_RMSNormBias):
    """(x * r + bias) * gain: the shift applied before the scale."""
    def forward(self, X):
        Xn = X / nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)
        if self.bias is not None:
            Xn = Xn + self.bias.data(X.context)
        return self.gain.data(X.context) * Xn


# --- dropout ---------------------------------------------------------------------------------

class DropoutOwnFlag(Dropout):
    """Consults its own flag, set once in __init__: autograd.predict_mode() never reaches it."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(p, **kwargs)
        self.is_training = True

    def forward(self, X):
        return self.drop(X) if self.is_training else X


class DropoutRecordingFlag(Dropout):
    """Takes 'autograd is recording' for 'training': train_mode() without record() never drops,
    and record(train_mode=False), as in evaluation with gradients, would."""
    def forward(self, X):
        return self.drop(X) if autograd.is_recording() else X


class DropoutKeepsP(Dropout):
    """Keeps with probability p instead of dropping with it."""
    def drop(self, X):
        keep = nd.random.uniform(0, 1, shape=X.shape, ctx=X.context, dtype=X.dtype) < self.p
        return X * keep / self.p


class DropoutNoRescale(Dropout):
    """Zeroes but does not rescale the survivors: the expected activation shrinks in training."""
    def drop(self, X):
        return X * self.keep(X)


class DropoutFixedMask(Dropout):
    """Draws the mask once, at the first call, and reuses it."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(p, **kwargs)
        self.mask = None

    def keep(self, X):
        if self.mask is None or self.mask.shape != X.shape:
            self.mask = super().keep(X)
        return self.mask


# --- properties: centered, causal_mask -------------------------------------------------------

class CenteredMedian(nn.Block):
    """Centers on the median, a robust statistic: the mean of the output is not zero."""
    def forward(self, X):
        return X - float(np.median(X.asnumpy()))


class MaskDiagonal(CausalMask):
    """triu(ones, 0): masks the diagonal too, so a query cannot see its own position."""
    def __init__(self, max_len, **kwargs):
        nn.Block.__init__(self, **kwargs)
        with self.name_scope():
            self.mask = self.params.get_constant(
                'mask', nd.array(np.triu(np.ones((max_len, max_len)), 0), dtype='bool'))


M = "tests.mutants.mxnet_contracts"
MUTANTS = [
    Mutant("mxnet", "sign_ste", f"{M}:sign_plain", "gradients", "no custom backward rule ran"),
    Mutant("mxnet", "sign_ste", f"{M}:SignHardtanhSTE", "gradients", "gradient for 'x' in the worked example"),
    Mutant("mxnet", "clipped_relu_grad", f"{M}:ClippedReLUNoClip", "gradients",
           "in the worked example: large upstream gradients are clipped"),
    Mutant("mxnet", "clipped_relu_grad", f"{M}:ClippedReLUGradAtZero", "gradients", "at index (3,)"),
    Mutant("mxnet", "scaled_tanh", f"{M}:ScaledTanhUnscaled", "gradients", "2x the expected one everywhere"),
    Mutant("mxnet", "log1pexp", f"{M}:log1pexp_plain_autodiff", "gradients", "NaN"),
    Mutant("mxnet", "log1pexp", f"{M}:Log1pExpNaiveBackward", "gradients", "NaN"),
    Mutant("mxnet", "scaled", f"{M}:scaled_forgets_k", "gradients", "the backward rule is scaled wrongly"),
    Mutant("mxnet", "scaled", f"{M}:ScaledKAsInput", "gradients",
           "writes no input gradient after the first input that wants none"),
    Mutant("mxnet", "scaled", f"{M}:scaled_grad_for_k", "gradients", "non-differentiable input 'k'"),
    Mutant("mxnet", "linear_vjp", f"{M}:LinearNoBiasGrad", "gradients", "gradient for input 'b' (case 'square')"),
    Mutant("mxnet", "linear_vjp", f"{M}:LinearUntransposed", "gradients", "gradient for input 'x' (case 'square')"),
    Mutant("mxnet", "softmax_cross_entropy", f"{M}:softmax_ce_naive", "values", "NaN", blocked=('gradients',)),
    Mutant("mxnet", "softmax_cross_entropy", f"{M}:SoftmaxCEGradToLabels", "gradients",
           "non-differentiable input 'labels'"),
    Mutant("mxnet", "softmax_cross_entropy", f"{M}:SoftmaxCEMissingY", "gradients", "gradient for input 'logits'"),
    Mutant("mxnet", "clamp_ste", f"{M}:ClampSTEInclusive", "gradients", "input 'X' (case 'boundary')"),
    Mutant("mxnet", "clamp_ste", f"{M}:ClampSTEGradToBounds", "gradients", "non-differentiable input 'lo'"),
    Mutant("mxnet", "rmsnorm_bias", f"{M}:BiasAlwaysCreated", "strict_loading", "it grows by nothing"),
    Mutant("mxnet", "rmsnorm_bias", f"{M}:BiasTolerantLoad", "strict_loading",
           "loaded strictly into the layer without an error"),
    Mutant("mxnet", "rmsnorm_bias", f"{M}:BiasBeforeScale", "values", "case 'random': mismatched elements", blocked=('gradients',)),
    Mutant("mxnet", "dropout", f"{M}:DropoutOwnFlag", "modes", "in evaluation mode, switched on the enclosing container", blocked=('batching', 'serialization', 'devices', 'device_parity', 'values', 'native', 'gradients')),
    Mutant("mxnet", "dropout", f"{M}:DropoutRecordingFlag", "modes", "the training flag did not reach the layer", blocked=('device_parity', 'gradients')),
    Mutant("mxnet", "dropout", f"{M}:DropoutKeepsP", "modes", "(Hoeffding bound, false-alarm probability 1e-09)"),
    Mutant("mxnet", "dropout", f"{M}:DropoutNoRescale", "modes", "surviving entries are scaled by 1, expected"),
    Mutant("mxnet", "dropout", f"{M}:DropoutFixedMask", "modes", "not drawn afresh per call"),
    Mutant("mxnet", "centered", f"{M}:CenteredMedian", "values", "case 'offset': mismatched elements", blocked=('gradients', 'properties')),
    Mutant("mxnet", "causal_mask", f"{M}:MaskDiagonal", "properties", "on the diagonal changed", also=('buffers',)),
]


# --- mixed precision: parameters cast to float16 under AMP -------------------------------------

class RMSNormCastsUnderAMP(_RMSNorm):
    """Casts itself to float16 when AMP is on ("to help AMP"): the float32 master weights are gone."""

    def forward(self, X):
        from mxnet.contrib.amp import amp
        if amp._amp_initialized and self.gain.dtype != np.float16:
            self.cast("float16")
        rms = nd.sqrt((X ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return self.gain.data(X.context).astype(X.dtype) * X / rms


MUTANTS += [
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormCastsUnderAMP", "mixed_precision", "'gain' is float16, not float32"),
]


# --- dtypes (the rmsnorm contract's dtypes; MXNet 1.9.1 has float16, no bfloat16) ---------------------

class RMSNormPromotes(_RMSNorm):
    """Upcasts for the statistic and never casts back: a float16 input gives a float32 output."""
    def forward(self, X):
        X32 = X.astype("float32")
        rms = nd.sqrt((X32 ** 2).mean(axis=-1, keepdims=True) + self.eps)
        return self.gain.data(X.context).astype("float32") * X32 / rms


class RMSNormAccumulates16(_RMSNorm):
    """Sums the squares one by one in the input's dtype (nd.cumsum keeps its running sum in the input's
    dtype, as a hand-written kernel would): in float16 it overflows past 65504 and stops growing once a
    term is below 1/2048 of it."""
    def forward(self, X):
        total = nd.cumsum(X * X, axis=X.ndim - 1).slice_axis(axis=-1, begin=-1, end=None)
        return self.gain.data(X.context) * X / nd.sqrt(total / X.shape[-1] + self.eps)


MUTANTS += [
    Mutant("mxnet", "rmsnorm", f"{M}:RMSNormPromotes", "values",
           "dtype float32, expected float16 (the output is float32 for float16 inputs: the layer promotes it)",
           dtype="float16"),
    Mutant("mxnet", "rmsnorm_long_rows", f"{M}:RMSNormAccumulates16", "values",
           "the statistics were accumulated in float16 (the contract requires float32 accumulation",
           dtype="float16"),
    # no MXNet mutant returns a gradient in the wrong dtype: autograd writes an input's gradient into the
    # buffer attach_grad allocated like the input (python/mxnet/ndarray/ndarray.py, attach_grad: zeros_like),
    # so a Function's float32 gradient for a float16 input arrives as float16 (tried: it does). None runs in
    # bfloat16 either: MXNet 1.9.1 has no bfloat16 for Gluon layers (harness/layerside/mxnet/core.py, _NO_DTYPE:
    # the bfloat16 target reads n/a).
]


# --- layernorm, gradient_reversal, groupnorm -------------------------------------------------

from layer_conformance.reference_impls.mxnet.groupnorm import GroupNorm as _GroupNorm  # noqa: E402
from layer_conformance.reference_impls.mxnet.layernorm import LayerNorm as _LayerNorm  # noqa: E402


class LayerNormEpsOutside(_LayerNorm):
    """sqrt(var) + eps: eps outside the square root (a variance ~ eps is normalized wrongly)."""
    def forward(self, X):
        Xc = nd.broadcast_sub(X, X.mean(axis=-1, keepdims=True))
        std = nd.sqrt((Xc ** 2).mean(axis=-1, keepdims=True)) + self.eps
        ctx = X.context
        return nd.broadcast_add(nd.broadcast_mul(nd.broadcast_div(Xc, std), self.gain.data(ctx)), self.bias.data(ctx))


class _NotFlipped(_ReverseBy):
    """The bundled rule with the minus forgotten."""
    def backward(self, g):
        return self.lam * g


def gradient_reversal_not_flipped(x, lam):
    """Scales by lam but forgets the minus: the gradient is not reversed."""
    return _NotFlipped(lam.asscalar().item())(x)


class GroupNormBiasBeforeGain(_GroupNorm):
    """(xhat + bias) * gain: the shift applied before the gain."""
    def forward(self, X):
        Xg = X.reshape((X.shape[0], self.groups, -1))
        Xc = nd.broadcast_sub(Xg, Xg.mean(axis=-1, keepdims=True))
        Y = nd.broadcast_div(Xc, nd.sqrt((Xc ** 2).mean(axis=-1, keepdims=True) + self.eps)).reshape(X.shape)
        per_channel = (1, -1) + (1,) * (X.ndim - 2)
        ctx = X.context
        return nd.broadcast_mul(nd.broadcast_add(Y, self.bias.data(ctx).reshape(per_channel)),
                                self.gain.data(ctx).reshape(per_channel))


MUTANTS += [
    Mutant("mxnet", "layernorm", f"{M}:LayerNormEpsOutside", "values", "case 'edge_rows': mismatched elements",
           blocked=("gradients", "native")),
    Mutant("mxnet", "gradient_reversal", f"{M}:gradient_reversal_not_flipped", "gradients",
           "gradient for 'x' in the worked example"),
    Mutant("mxnet", "groupnorm", f"{M}:GroupNormBiasBeforeGain", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
]
