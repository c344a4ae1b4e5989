"""Broken PyTorch implementations of the custom-function and exercise contracts, each breaking
the contract's characteristic property; tests/test_mutants.py runs them."""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from layer_conformance.reference_impls.torch.clamp_ste import ClampSTE as _ClampSTE
from layer_conformance.reference_impls.torch.clipped_relu_grad import ClippedReLUGrad as _ClippedReLUGrad
from layer_conformance.reference_impls.torch.gradient_reversal import GradientReversal as _GradientReversal
from layer_conformance.reference_impls.torch.groupnorm import GroupNorm as _GroupNorm
from layer_conformance.reference_impls.torch.layernorm import LayerNorm as _LayerNorm
from layer_conformance.reference_impls.torch.linear_vjp import Linear as _Linear
from layer_conformance.reference_impls.torch.rmsnorm import RMSNorm as _RMSNorm
from layer_conformance.reference_impls.torch.rmsnorm_bias import RMSNorm as _RMSNormBias
from layer_conformance.reference_impls.torch.safe_norm import SafeNorm as _SafeNorm
from layer_conformance.reference_impls.torch.scaled_tanh import ScaledTanh as _ScaledTanh
from tests.mutants.base_torch import CausalMask, Dropout, RMSNorm
from tests.mutants.catalogue import Mutant


# --- sign_ste, clipped_relu_grad, scaled_tanh ------------------------------------------------

def sign_plain(x):
    """No custom rule: sign's true gradient is zero, so nothing passes straight through."""
    return torch.sign(x)


class SignHardtanhSTE(torch.autograd.Function):
    """A different estimator: the gradient only where |x| <= 1 (hardtanh STE), not the identity."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x.abs() <= 1).to(g.dtype)


class ClippedReLUNoClip(_ClippedReLUGrad):
    """The ReLU gradient without the clipping."""
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


class ClippedReLUGradAtZero(_ClippedReLUGrad):
    """x >= 0 instead of x > 0: a gradient passes at exactly zero."""
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.clamp(g * (x >= 0).to(g.dtype), -1.0, 1.0)


class ScaledTanhUnscaled(_ScaledTanh):
    """Forgets the 0.5: tanh's true gradient."""
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


# --- log1pexp, safe_norm, scaled ------------------------------------------------------------

def log1pexp_plain_autodiff(x):
    """The formula without the custom rule: autodiff divides inf by inf at x = 1000 (NaN)."""
    return torch.log(1.0 + torch.exp(x))


class SafeNormUnguarded(_SafeNorm):
    """x / norm without the where: 0 / 0 = NaN at the origin."""
    @staticmethod
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        return g * x / n


class SafeNormNoJvp(_SafeNorm):
    """Only the reverse rule: forward mode has nothing to run."""
    jvp = torch.autograd.Function.jvp  # torch's own, which says the layer does not implement it


class SafeNormJvpUnnormalized(_SafeNorm):
    """The forward rule forgets to divide by the norm; the reverse rule is right."""
    @staticmethod
    def jvp(ctx, t):
        x, _ = ctx.saved_tensors
        return torch.sum(x * t)


class ScaledGradForK(torch.autograd.Function):
    """Returns the true derivative for the setting k instead of None."""
    @staticmethod
    def forward(ctx, k, x):
        ctx.save_for_backward(k, x)
        return k * x

    @staticmethod
    def backward(ctx, g):
        k, x = ctx.saved_tensors
        return (g * x).sum(), k * g


class ScaledForgetsK(torch.autograd.Function):
    """Passes g through unscaled."""
    @staticmethod
    def forward(ctx, k, x):
        return k * x

    @staticmethod
    def backward(ctx, g):
        return None, g


# --- linear_vjp, softmax_cross_entropy ------------------------------------------------------

class LinearNoBiasGrad(_Linear):
    """Returns None for b: the bias never learns."""
    @staticmethod
    def backward(ctx, g):
        W, x = ctx.saved_tensors
        return torch.outer(g, x), W.T @ g, None


class LinearUntransposed(_Linear):
    """W g instead of W^T g: same shape for a square W, wrong numbers."""
    @staticmethod
    def backward(ctx, g):
        W, x = ctx.saved_tensors
        return torch.outer(g, x), W @ g, g


def softmax_ce_naive(logits, labels):
    """exp without the max shift: exp(1e4) = inf, inf / inf = NaN."""
    p = torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True)
    return -(labels * torch.log(p)).sum(-1)


class SoftmaxCEGradToLabels(torch.autograd.Function):
    """Returns -g log p for the labels instead of None."""
    @staticmethod
    def forward(ctx, logits, labels):
        log_p = torch.log_softmax(logits, dim=-1)
        ctx.save_for_backward(log_p, labels)
        return -(labels * log_p).sum(-1)

    @staticmethod
    def backward(ctx, g):
        log_p, labels = ctx.saved_tensors
        return g[..., None] * (log_p.exp() - labels), -g[..., None] * log_p


class SoftmaxCEMissingY(torch.autograd.Function):
    """Returns p instead of p - y."""
    @staticmethod
    def forward(ctx, logits, labels):
        log_p = torch.log_softmax(logits, dim=-1)
        ctx.save_for_backward(log_p)
        return -(labels * log_p).sum(-1)

    @staticmethod
    def backward(ctx, g):
        (log_p,) = ctx.saved_tensors
        return g[..., None] * log_p.exp(), None


# --- fourier_half, clamp_ste ----------------------------------------------------------------

class FourierRfft(nn.Module):
    """rfft keeps n // 2 + 1 coefficients: one more than half."""
    def forward(self, X):
        return torch.fft.rfft(X, dim=-1)


class FourierDouble(nn.Module):
    """Transforms in float64: complex128 output for float32 input."""
    def forward(self, X):
        return torch.fft.fft(X.double(), dim=-1)[..., : X.shape[-1] // 2]


class ClampSTEInclusive(_ClampSTE):
    """lo <= X <= hi: passes the gradient on the boundary, as the native clamp does."""
    @staticmethod
    def backward(ctx, g):
        X, lo, hi = ctx.saved_tensors
        return g * ((X >= lo) & (X <= hi)).to(g.dtype), None, None


class ClampSTEGradToBounds(_ClampSTE):
    """Also returns gradients for the bounds lo and hi, which the contract says get none."""
    @staticmethod
    def backward(ctx, g):
        X, lo, hi = ctx.saved_tensors
        inside = ((X > lo) & (X < hi)).to(g.dtype)
        return g * inside, (g * (X <= lo)).sum(), (g * (X >= hi)).sum()


# --- rmsnorm_bias ----------------------------------------------------------------------------

class BiasAlwaysCreated(RMSNorm):
    """Creates the bias whatever the flag says (and only uses it when asked): the saved state
    does not change shape, so a bias-free checkpoint is indistinguishable."""
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__(d, eps)
        self.bias = nn.Parameter(torch.zeros(d))
        self.use_bias = bias

    def forward(self, X):
        Y = super().forward(X)
        return Y + self.bias if self.use_bias else Y


class BiasTolerantLoad(_RMSNormBias):
    """"Backward compatibility": fills a missing bias with zeros, so a checkpoint saved without
    it loads silently under strict=True."""
    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if self.bias is not None and prefix + "bias" not in state_dict:
            state_dict[prefix + "bias"] = torch.zeros_like(self.bias)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class BiasBeforeScale(_RMSNormBias):
    """(x * r + bias) * gain: the shift applied before the scale."""
    def forward(self, X):
        rms = X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return self.gain * (X * rms + (0 if self.bias is None else self.bias))


# --- layernorm -------------------------------------------------------------------------------

class LayerNormUnbiasedVariance(_LayerNorm):
    """torch.var's default: the unbiased (1/(d-1)) variance where LayerNorm divides by d."""
    def forward(self, X):
        Xc = X - X.mean(-1, keepdim=True)
        return self.gain * Xc * torch.rsqrt(X.var(-1, keepdim=True) + self.eps) + self.bias


class LayerNormBiasBeforeGain(_LayerNorm):
    """(xhat + bias) * gain: the shift applied before the gain."""
    def forward(self, X):
        Xc = X - X.mean(-1, keepdim=True)
        return self.gain * (Xc * torch.rsqrt(Xc.pow(2).mean(-1, keepdim=True) + self.eps) + self.bias)


class LayerNormOnePassVariance(_LayerNorm):
    """var = E[x^2] - E[x]^2 in one pass: cancels where the mean is large against the spread."""
    def forward(self, X):
        mu = X.mean(-1, keepdim=True)
        var = X.pow(2).mean(-1, keepdim=True) - mu * mu
        return self.gain * (X - mu) * torch.rsqrt(var + self.eps) + self.bias


# --- groupnorm -------------------------------------------------------------------------------

class GroupNormAcrossBatch(_GroupNorm):
    """The statistics of a group taken over the whole batch (as BatchNorm does), not per example."""
    def forward(self, X):
        N, C = X.shape[:2]
        Xg = X.reshape(N, self.groups, -1).transpose(0, 1).reshape(self.groups, -1)
        Xc = Xg - Xg.mean(-1, keepdim=True)
        Y = (Xc * torch.rsqrt(Xc.pow(2).mean(-1, keepdim=True) + self.eps))
        Y = Y.reshape(self.groups, N, -1).transpose(0, 1).reshape(X.shape)
        per_channel = (C,) + (1,) * (X.dim() - 2)
        return self.gain.reshape(per_channel) * Y + self.bias.reshape(per_channel)


# --- gradient_reversal -----------------------------------------------------------------------

class GradientReversalNotFlipped(_GradientReversal):
    """Scales by lam but forgets the minus: the gradient is not reversed."""
    @staticmethod
    def backward(ctx, g):
        (lam,) = ctx.saved_tensors
        return lam.to(g.dtype) * g, None


class GradientReversalUnscaled(_GradientReversal):
    """Reverses but ignores lam: always -g."""
    @staticmethod
    def backward(ctx, g):
        return -g, None


class GradientReversalGradToLam(_GradientReversal):
    """Returns a cotangent for lam, a setting: sum(-g * x), as if lam were data."""
    @staticmethod
    def forward(ctx, x, lam):
        ctx.save_for_backward(x, lam)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        x, lam = ctx.saved_tensors
        return -lam.to(g.dtype) * g, -(g * x).sum()


# --- dropout ---------------------------------------------------------------------------------

class DropoutOwnFlag(Dropout):
    """Consults its own flag, set once in __init__: .eval() on a container never reaches it."""
    def __init__(self, p=0.5):
        super().__init__(p)
        self.is_training = True

    def forward(self, X):
        return self.drop(X) if self.is_training else X


class DropoutGradFlag(Dropout):
    """Takes 'gradients are on' for 'training': .eval() does not turn autograd off."""
    def forward(self, X):
        return self.drop(X) if torch.is_grad_enabled() else X


class DropoutKeepsP(Dropout):
    """Keeps with probability p instead of dropping with it."""
    def drop(self, X):
        return X * (torch.rand_like(X) < self.p).to(X.dtype) / self.p


class DropoutNoRescale(Dropout):
    """Zeroes but does not rescale the survivors: the expected activation shrinks in training."""
    def drop(self, X):
        return X * self.keep(X)


class DropoutFixedMask(Dropout):
    """Draws the mask once, at the first call, and reuses it."""
    def __init__(self, p=0.5):
        super().__init__(p)
        self.mask = None

    def keep(self, X):
        if self.mask is None or self.mask.shape != X.shape:
            self.mask = super().keep(X)
        return self.mask


# --- checkpointed_tanh_stack -----------------------------------------------------------------

class CheckpointStaleWeights(nn.Module):
    """The checkpointed step reads its weight from an attribute that forward rebinds after the
    stack: the recomputation during backward runs with other weights than forward did."""
    def __init__(self, d, depth=4):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-0.5, 0.5, d * d, dtype=torch.float64).reshape(d, d).float())
        self.b = nn.Parameter(torch.zeros(d))
        self.depth = depth
        self.w_now = None

    def _step(self, h):
        return torch.tanh(h @ self.w_now + self.b)

    def forward(self, h):
        self.w_now = self.w * 1.0
        for _ in range(self.depth):
            h = checkpoint(self._step, h, use_reentrant=False)
        self.w_now = self.w * 0.5  # "decayed" for the next call: backward recomputes with this
        return h


# --- properties: centered, causal_mask -------------------------------------------------------

class CenteredMedian(nn.Module):
    """Centers on the median, a robust statistic: the mean of the output is not zero."""
    def forward(self, X):
        return X - X.median()


class MaskDiagonal(CausalMask):
    """triu(ones, 0): masks the diagonal too, so a query cannot see its own position."""
    def masked(self, n):
        return torch.triu(torch.ones(n, n, dtype=torch.bool), 0)


M = "tests.mutants.torch_contracts"
MUTANTS = [
    Mutant("torch", "sign_ste", f"{M}:sign_plain", "gradients", "no custom backward rule ran"),
    Mutant("torch", "sign_ste", f"{M}:SignHardtanhSTE", "gradients", "gradient for 'x' in the worked example"),
    Mutant("torch", "clipped_relu_grad", f"{M}:ClippedReLUNoClip", "gradients",
           "in the worked example: large upstream gradients are clipped"),
    Mutant("torch", "clipped_relu_grad", f"{M}:ClippedReLUGradAtZero", "gradients", "at index (3,)"),
    Mutant("torch", "scaled_tanh", f"{M}:ScaledTanhUnscaled", "gradients", "2x the expected one everywhere"),
    Mutant("torch", "log1pexp", f"{M}:log1pexp_plain_autodiff", "gradients", "NaN"),
    Mutant("torch", "safe_norm", f"{M}:SafeNormUnguarded", "gradients", "at 0: [0, 0, 0] instead of NaN"),
    Mutant("torch", "safe_norm", f"{M}:SafeNormNoJvp", "forward_mode", "must implement the jvp function"),
    Mutant("torch", "safe_norm", f"{M}:SafeNormJvpUnnormalized", "forward_mode", "output tangent vs the reference's J t"),
    Mutant("torch", "scaled", f"{M}:ScaledGradForK", "gradients", "non-differentiable input 'k'"),
    Mutant("torch", "scaled", f"{M}:ScaledForgetsK", "gradients", "the backward rule is scaled wrongly"),
    Mutant("torch", "linear_vjp", f"{M}:LinearNoBiasGrad", "gradients", "no gradient reached 'b'"),
    Mutant("torch", "linear_vjp", f"{M}:LinearUntransposed", "gradients", "gradient for input 'x' (case 'square')", blocked=('second_order', 'layout'), also=('compiled', 'export')),
    Mutant("torch", "softmax_cross_entropy", f"{M}:softmax_ce_naive", "values", "NaN", blocked=('gradients', 'second_order')),
    Mutant("torch", "softmax_cross_entropy", f"{M}:SoftmaxCEGradToLabels", "gradients",
           "non-differentiable input 'labels'", blocked=('second_order',)),
    Mutant("torch", "softmax_cross_entropy", f"{M}:SoftmaxCEMissingY", "gradients", "gradient for input 'logits'", blocked=('second_order',)),
    Mutant("torch", "fourier_half", f"{M}:FourierRfft", "values", "output shape [4, 9], expected [4, 8]"),
    Mutant("torch", "fourier_half", f"{M}:FourierDouble", "values", "dtype complex128, expected complex64"),
    Mutant("torch", "clamp_ste", f"{M}:ClampSTEInclusive", "gradients", "input 'X' (case 'boundary')"),
    Mutant("torch", "clamp_ste", f"{M}:ClampSTEGradToBounds", "gradients", "non-differentiable input 'lo'"),
    Mutant("torch", "rmsnorm_bias", f"{M}:BiasAlwaysCreated", "strict_loading", "it grows by nothing"),
    Mutant("torch", "rmsnorm_bias", f"{M}:BiasTolerantLoad", "strict_loading",
           "loaded strictly into the layer without an error"),
    Mutant("torch", "rmsnorm_bias", f"{M}:BiasBeforeScale", "values", "case 'random': mismatched elements", blocked=('gradients',)),
    Mutant("torch", "layernorm", f"{M}:LayerNormUnbiasedVariance", "values", "case 'random': mismatched elements", blocked=("gradients", "native")),
    Mutant("torch", "layernorm", f"{M}:LayerNormBiasBeforeGain", "values", "case 'random': mismatched elements", blocked=("gradients", "native")),
    Mutant("torch", "layernorm", f"{M}:LayerNormOnePassVariance", "values", "case 'edge_rows': mismatched elements", blocked=("gradients", "native")),
    Mutant("torch", "groupnorm", f"{M}:GroupNormAcrossBatch", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
    Mutant("torch", "gradient_reversal", f"{M}:GradientReversalNotFlipped", "gradients", "gradient for 'x' in the worked example"),
    Mutant("torch", "gradient_reversal", f"{M}:GradientReversalUnscaled", "gradients", "lam = 0.5"),
    Mutant("torch", "gradient_reversal", f"{M}:GradientReversalGradToLam", "gradients", "non-differentiable input 'lam'"),
    Mutant("torch", "dropout", f"{M}:DropoutOwnFlag", "modes", "in evaluation mode, switched on the enclosing container", blocked=('compiled', 'export', 'gradients', 'native', 'serialization', 'values', 'batching', 'layout', 'abstract')),
    Mutant("torch", "dropout", f"{M}:DropoutGradFlag", "modes", "in evaluation mode, switched on the enclosing container", blocked=('compiled', 'export', 'gradients', 'native', 'serialization', 'values', 'batching', 'layout', 'abstract')),
    Mutant("torch", "dropout", f"{M}:DropoutKeepsP", "modes", "(Hoeffding bound, false-alarm probability 1e-09)"),
    Mutant("torch", "dropout", f"{M}:DropoutNoRescale", "modes", "surviving entries are scaled by 1, expected"),
    Mutant("torch", "dropout", f"{M}:DropoutFixedMask", "modes", "not drawn afresh per call"),
    Mutant("torch", "checkpointed_tanh_stack", f"{M}:CheckpointStaleWeights", "parameters", "untracked tensor attribute 'w_now'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients')),
    Mutant("torch", "centered", f"{M}:CenteredMedian", "values", "case 'offset': mismatched elements", blocked=('gradients', 'properties')),
    Mutant("torch", "causal_mask", f"{M}:MaskDiagonal", "properties", "on the diagonal changed", also=('buffers',)),
]


# --- second order: backward rules that are right but not differentiable -------------------------

class Log1pExpDetachedBackward(torch.autograd.Function):
    """backward computes sigmoid on a detached x: the gradient is right, but a constant to grad
    of grad, so the Hessian-vector product is lost."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(x, torch.zeros_like(x))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(x.detach())


class SoftmaxCESavesLogP(torch.autograd.Function):
    """Saves log_softmax(logits), an intermediate of the unrecorded forward, instead of the logits:
    first order is right, but the backward rule's p is a constant to grad of grad."""
    @staticmethod
    def forward(ctx, logits, labels):
        log_p = torch.log_softmax(logits, dim=-1)
        ctx.save_for_backward(log_p, labels)
        return -(labels * log_p).sum(-1)

    @staticmethod
    def backward(ctx, g):
        log_p, labels = ctx.saved_tensors
        return g[..., None] * (log_p.exp() * labels.sum(-1, keepdim=True) - labels), None


MUTANTS += [
    Mutant("torch", "log1pexp", f"{M}:Log1pExpDetachedBackward", "second_order",
           "Hessian-vector product for input 'x' (case 'random') is None"),
    Mutant("torch", "softmax_cross_entropy", f"{M}:SoftmaxCESavesLogP", "second_order",
           "the backward rule's result is a constant to autodiff"),
]


# --- mixed precision: variables stored in the compute dtype ------------------------------------

class RMSNormStoresBf16Gain(_RMSNorm):
    """Under autocast it keeps the cast gain as its parameter ("cache the bf16 weight"): from then on the
    optimizer updates a bfloat16 weight. Right in float32, so only mixed_precision sees it."""

    def forward(self, X):
        low = torch.get_autocast_dtype("cpu")
        if torch.is_autocast_enabled("cpu") and self.gain.dtype != low:
            self.gain = nn.Parameter(self.gain.detach().to(low))
        rms = X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return self.gain * X * rms


MUTANTS += [
    Mutant("torch", "rmsnorm", f"{M}:RMSNormStoresBf16Gain", "mixed_precision", "'gain' is bfloat16, not float32"),
]


# --- dtypes (the rmsnorm contract's dtypes: bfloat16, float16, float64) ------------------------

class RMSNormReturnsFloat64(_RMSNorm):
    """Computes in float64 "for accuracy" and returns that: a float32 input gives a float64 output whose numbers
    are right, so only the dtype tells it from the native torch.nn.RMSNorm."""
    def forward(self, X):
        X64 = X.double()
        return self.gain.double() * X64 * X64.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class RMSNormPromotes(_RMSNorm):
    """Upcasts for the statistic and never casts back: a bfloat16 input gives a float32 output."""
    def forward(self, X):
        X32 = X.float()
        return self.gain.float() * X32 * X32.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class RMSNorm16BitStatistic(_RMSNorm):
    """The mean square in the input's own 16-bit dtype: x^2 of a row near eps underflows in float16."""
    def forward(self, X):
        return self.gain * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


MUTANTS += [
    Mutant("torch", "rmsnorm", f"{M}:RMSNormReturnsFloat64", "values",
           "dtype float64, expected float32 (the output is float64 for float32 inputs: the layer promotes it)",
           also=("composition",), blocked=("native",)),  # the next float32 layer in a Sequential refuses it
    Mutant("torch", "rmsnorm", f"{M}:RMSNormPromotes", "values",
           "dtype float32, expected bfloat16 (the output is float32 for bfloat16 inputs: the layer promotes it)",
           dtype="bfloat16", blocked=("native",)),
    Mutant("torch", "rmsnorm", f"{M}:RMSNorm16BitStatistic", "values", "case 'edge_rows': mismatched elements",
           dtype="float16", blocked=("gradients", "native", "properties")),
    # no torch mutant returns a gradient in the wrong dtype: autograd casts what a custom backward returns
    # to its input's dtype (torch/csrc/autograd/engine.cpp, validate_outputs), so the mistake cannot happen
]


def _sum_sequentially(terms):
    """Adds the last axis's terms one by one in their own dtype, as a hand-written kernel's running sum
    does (torch's own reductions accumulate 16-bit inputs in float32, so they would not show it)."""
    acc = torch.zeros_like(terms[..., :1])
    for j in range(terms.shape[-1]):
        acc = acc + terms[..., j:j + 1]
    return acc


class RMSNormAccumulates16(RMSNorm):
    """Sums the squares in the input's dtype: in bfloat16 the running sum stops growing once a term is
    below 1/256 of it, so long rows get a mean square far too small."""
    def inverse_rms(self, X):
        ms = _sum_sequentially(X * X) / X.shape[-1]
        return (ms + self.eps).rsqrt()


MUTANTS += [
    Mutant("torch", "rmsnorm_long_rows", f"{M}:RMSNormAccumulates16", "values",
           "the statistics were accumulated in bfloat16 (the contract requires float32 accumulation",
           dtype="bfloat16"),
]
