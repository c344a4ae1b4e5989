"""Broken JAX / Flax NNX implementations of the custom-function and exercise contracts, each
breaking the contract's characteristic property; tests/test_mutants.py runs them.

Nothing here creates an array at import time: the adapter must still be able to ask for a second
host device, which JAX allows only before its first operation.
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from layer_conformance.reference_impls.jax.rmsnorm import RMSNorm as _RMSNorm
from layer_conformance.reference_impls.jax.rmsnorm_bias import RMSNorm as _RMSNormBias
from tests.mutants.base_jax import CausalMask, RMSNorm
from tests.mutants.catalogue import Mutant


def _vjp(fwd, bwd):
    """A custom_vjp function from its value function, fwd and bwd rules."""
    def wrap(f):
        f = jax.custom_vjp(f)
        f.defvjp(fwd, bwd)
        return f
    return wrap


# --- sign_ste, clipped_relu_grad, scaled_tanh ------------------------------------------------

def sign_plain(x):
    """No custom rule: sign's true gradient is zero, so nothing passes straight through."""
    return jnp.sign(x)


@_vjp(lambda x: (jnp.sign(x), x), lambda x, g: (g * (jnp.abs(x) <= 1).astype(g.dtype),))
def sign_hardtanh_ste(x):
    """A different estimator: the gradient only where |x| <= 1 (hardtanh STE), not the identity."""
    return jnp.sign(x)


@_vjp(lambda x: (jnp.maximum(x, 0.0), x), lambda x, g: (g * (x > 0).astype(g.dtype),))
def clipped_relu_no_clip(x):
    """The ReLU gradient without the clipping."""
    return jnp.maximum(x, 0.0)


@_vjp(lambda x: (jnp.maximum(x, 0.0), x), lambda x, g: (jnp.clip(g * (x >= 0).astype(g.dtype), -1.0, 1.0),))
def clipped_relu_grad_at_zero(x):
    """x >= 0 instead of x > 0: a gradient passes at exactly zero."""
    return jnp.maximum(x, 0.0)


@_vjp(lambda x: (jnp.tanh(x), jnp.tanh(x)), lambda y, g: (g * (1.0 - y * y),))
def scaled_tanh_unscaled(x):
    """Forgets the 0.5: tanh's true gradient."""
    return jnp.tanh(x)


# --- log1pexp, safe_norm, scaled ------------------------------------------------------------

def log1pexp_plain_autodiff(x):
    """The formula without the custom rule: autodiff divides inf by inf at x = 1000 (NaN)."""
    return jnp.log(1.0 + jnp.exp(x))


@_vjp(lambda x: (jnp.logaddexp(x, 0.0), x), lambda x, g: (g * jnp.exp(x) / (1.0 + jnp.exp(x)),))
def log1pexp_unstable_rule(x):
    """A custom rule that writes out the unstable quotient exp(x) / (1 + exp(x)) itself."""
    return jnp.logaddexp(x, 0.0)


@jax.custom_jvp
def safe_norm_unguarded(x):
    """The rule divides by the norm without the where: 0 / 0 = NaN at the origin."""
    return jnp.sqrt(jnp.sum(x * x))


@safe_norm_unguarded.defjvp
def _safe_norm_unguarded_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = safe_norm_unguarded(x)
    return n, jnp.sum(x * t) / n


def _norm_fwd(x):
    n = jnp.sqrt(jnp.sum(x * x))
    return n, (x, n)


@_vjp(_norm_fwd, lambda res, g: (g * res[0] / jnp.where(res[1] == 0.0, 1.0, res[1]),))
def safe_norm_custom_vjp(x):
    """The right reverse rule, as custom_vjp instead of custom_jvp: JAX refuses forward mode."""
    return jnp.sqrt(jnp.sum(x * x))


@jax.custom_jvp
def safe_norm_jvp_unnormalized(x):
    """The rule forgets to divide by the norm (reverse mode, its transpose, is wrong too)."""
    return jnp.sqrt(jnp.sum(x * x))


@safe_norm_jvp_unnormalized.defjvp
def _safe_norm_jvp_unnormalized(primals, tangents):
    (x,), (t,) = primals, tangents
    return safe_norm_jvp_unnormalized(x), jnp.sum(x * t)


@_vjp(lambda k, x: (k * x, (k, x)), lambda res, g: (jnp.sum(g * res[1]), res[0] * g))
def scaled_grad_for_k(k, x):
    """No nondiff_argnums, and bwd returns the true derivative for the setting k, not None."""
    return k * x


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def scaled_forgets_k(k, x):
    """Passes g through unscaled."""
    return k * x


scaled_forgets_k.defvjp(lambda k, x: (k * x, None), lambda k, res, g: (g,))


# --- linear_vjp, softmax_cross_entropy ------------------------------------------------------

def _linear_fwd(W, x, b):
    return W @ x + b, (W, x)


@_vjp(_linear_fwd, lambda res, g: (jnp.outer(g, res[1]), res[0].T @ g, None))
def linear_no_bias_grad(W, x, b):
    """Returns None for b: JAX reads it as a zero cotangent, so the bias never learns."""
    return W @ x + b


@_vjp(_linear_fwd, lambda res, g: (jnp.outer(g, res[1]), res[0] @ g, g))
def linear_untransposed(W, x, b):
    """W g instead of W^T g: same shape for a square W, wrong numbers."""
    return W @ x + b


def softmax_ce_naive(logits, labels):
    """exp without the max shift: exp(1e4) = inf, inf / inf = NaN."""
    p = jnp.exp(logits) / jnp.sum(jnp.exp(logits), axis=-1, keepdims=True)
    return -jnp.sum(labels * jnp.log(p), axis=-1)


def _ce(logits, labels):
    return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def _ce_fwd(logits, labels):
    return _ce(logits, labels), (jax.nn.log_softmax(logits, axis=-1), labels)


@_vjp(_ce_fwd, lambda res, g: (g[..., None] * (jnp.exp(res[0]) - res[1]), -g[..., None] * res[0]))
def softmax_ce_grad_to_labels(logits, labels):
    """Returns -g log p for the labels instead of None."""
    return _ce(logits, labels)


@_vjp(_ce_fwd, lambda res, g: (g[..., None] * jnp.exp(res[0]), None))
def softmax_ce_missing_y(logits, labels):
    """Returns p instead of p - y."""
    return _ce(logits, labels)


# --- fourier_half, clamp_ste ----------------------------------------------------------------

class FourierRfft(nnx.Module):
    """rfft keeps n // 2 + 1 coefficients: one more than half."""
    def __call__(self, X):
        return jnp.fft.rfft(X, axis=-1)


class FourierMagnitude(nnx.Module):
    """Returns |coefficients|: real float32 where complex64 is expected, the phase is lost."""
    def __call__(self, X):
        return jnp.abs(jnp.fft.fft(X, axis=-1)[..., : X.shape[-1] // 2])


def clamp_plain(X, lo, hi):
    """No custom rule: jnp.clip's own gradient, which passes half of g on the boundary."""
    return jnp.clip(X, lo, hi)


def _clamp_fwd(X, lo, hi):
    return jnp.clip(X, lo, hi), (X, lo, hi)


@_vjp(_clamp_fwd, lambda res, g: (g * ((res[0] >= res[1]) & (res[0] <= res[2])).astype(g.dtype), None, None))
def clamp_ste_inclusive(X, lo, hi):
    """lo <= X <= hi: passes the gradient on the boundary."""
    return jnp.clip(X, lo, hi)


def _clamp_grad_to_bounds(res, g):
    X, lo, hi = res
    inside = ((X > lo) & (X < hi)).astype(g.dtype)
    return g * inside, jnp.sum(g * (X <= lo)), jnp.sum(g * (X >= hi))


@_vjp(_clamp_fwd, _clamp_grad_to_bounds)
def clamp_ste_grad_to_bounds(X, lo, hi):
    """Also returns gradients for the bounds lo and hi, which the contract says get none."""
    return jnp.clip(X, lo, hi)


# --- rmsnorm_bias ----------------------------------------------------------------------------

def _normalized(X, eps):
    return X / jnp.sqrt((X ** 2).mean(-1, keepdims=True) + eps)


class BiasAlwaysCreated(RMSNorm):
    """Creates the bias whatever the flag says (and only uses it when asked): the saved state
    does not change shape, so a bias-free checkpoint is indistinguishable."""
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__(d, eps)
        self.bias = nnx.Param(jnp.zeros(d))
        self.use_bias = bias

    def __call__(self, X):
        Y = super().__call__(X)
        return Y + self.bias[...] if self.use_bias else Y


class BiasRawArray(RMSNorm):
    """The bias as a raw jnp array: no nnx.Param, so it is neither trained nor saved."""
    def __init__(self, d, eps=1e-6, bias=False):
        super().__init__(d, eps)
        self.bias = jnp.zeros(d) if bias else None

    def __call__(self, X):
        Y = super().__call__(X)
        return Y if self.bias is None else Y + self.bias


class BiasBeforeScale(_RMSNormBias):
    """(x * r + bias) * gain: the shift applied before the scale."""
    def __call__(self, X):
        return self.gain[...] * (_normalized(X, self.eps) + (0 if self.bias is None else self.bias[...]))


# --- dropout ---------------------------------------------------------------------------------

def _drop(X, key, p):
    return jnp.where(jax.random.bernoulli(key, 1.0 - p, X.shape), X / (1.0 - p), jnp.zeros_like(X))


class DropoutTorchFlag(nnx.Module):
    """Consults a torch-style `training` attribute: NNX's switch (Module.eval(), nnx.view) sets
    `deterministic`, so switching the container never reaches it."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p, self.training, self.rngs = p, True, rngs.dropout.fork()

    def __call__(self, X):
        return _drop(X, self.rngs(), self.p) if self.training else X


class DropoutCallArgument(nnx.Module):
    """Takes `deterministic` only as a call argument (default False): a container calls it
    without one, so it drops in evaluation too."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p, self.rngs = p, rngs.dropout.fork()

    def __call__(self, X, deterministic=False):
        return X if deterministic else _drop(X, self.rngs(), self.p)


class DropoutKeyOnce(nnx.Module):
    """Makes one key in __init__ and reuses it: a JAX key is a value, so every call draws the
    same mask (an nnx.Rngs stream advances its counter per call)."""
    def __init__(self, p=0.5):
        self.p, self.deterministic = p, False
        self.key = jax.random.key(0)

    def __call__(self, X):
        return X if self.deterministic else _drop(X, self.key, self.p)


class DropoutKeepsP(nnx.Module):
    """Keeps with probability p instead of dropping with it."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p, self.deterministic, self.rngs = p, False, rngs.dropout.fork()

    def __call__(self, X):
        if self.deterministic:
            return X
        return jnp.where(jax.random.bernoulli(self.rngs(), self.p, X.shape), X / self.p, 0.0)


class DropoutNoRescale(nnx.Module):
    """Zeroes but does not rescale the survivors: the expected activation shrinks in training."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p, self.deterministic, self.rngs = p, False, rngs.dropout.fork()

    def __call__(self, X):
        if self.deterministic:
            return X
        return jnp.where(jax.random.bernoulli(self.rngs(), 1.0 - self.p, X.shape), X, 0.0)


# --- checkpointed_tanh_stack -----------------------------------------------------------------

class CheckpointClosedOverWeights(nnx.Module):
    """Builds the checkpointed step in __init__ closed over the weights' values at that moment:
    a captured array is a constant to JAX, so the stack keeps computing with the initial weights
    after they change, and no gradient reaches them."""
    def __init__(self, d, depth=4):
        self.w = nnx.Param(jnp.asarray(np.linspace(-0.5, 0.5, d * d).reshape(d, d), dtype=jnp.float32))
        self.b = nnx.Param(jnp.zeros(d))
        self.depth = depth
        w, b = self.w[...], self.b[...]
        self.step = jax.checkpoint(lambda h: jnp.tanh(h @ w + b))

    def __call__(self, h):
        for _ in range(self.depth):
            h = self.step(h)
        return h


class CheckpointStopGradient(nnx.Module):
    """Wraps the weights in stop_gradient inside the checkpointed step, taking "recompute
    instead of store" for "do not differentiate": values right, weight gradients zero."""
    def __init__(self, d, depth=4):
        self.w = nnx.Param(jnp.asarray(np.linspace(-0.5, 0.5, d * d).reshape(d, d), dtype=jnp.float32))
        self.b = nnx.Param(jnp.zeros(d))
        self.depth = depth

    def __call__(self, h):
        step = jax.checkpoint(lambda h, w, b: jnp.tanh(h @ jax.lax.stop_gradient(w) + b))
        for _ in range(self.depth):
            h = step(h, self.w[...], self.b[...])
        return h


# --- properties: centered, causal_mask -------------------------------------------------------

class CenteredMedian(nnx.Module):
    """Centers on the median, a robust statistic: the mean of the output is not zero."""
    def __call__(self, X):
        return X - jnp.median(X)


class MaskDiagonal(CausalMask):
    """triu(ones, 0): masks the diagonal too, so a query cannot see its own position."""
    def masked(self, n):
        return jnp.triu(jnp.ones((n, n), dtype=bool), 0)


M = "tests.mutants.jax_contracts"
MUTANTS = [
    Mutant("jax", "sign_ste", f"{M}:sign_plain", "gradients", "no custom backward rule ran"),
    Mutant("jax", "sign_ste", f"{M}:sign_hardtanh_ste", "gradients", "gradient for 'x' in the worked example"),
    Mutant("jax", "clipped_relu_grad", f"{M}:clipped_relu_no_clip", "gradients",
           "in the worked example: large upstream gradients are clipped"),
    Mutant("jax", "clipped_relu_grad", f"{M}:clipped_relu_grad_at_zero", "gradients", "at index (3,)"),
    Mutant("jax", "scaled_tanh", f"{M}:scaled_tanh_unscaled", "gradients", "2x the expected one everywhere"),
    Mutant("jax", "log1pexp", f"{M}:log1pexp_plain_autodiff", "gradients", "NaN"),
    Mutant("jax", "log1pexp", f"{M}:log1pexp_unstable_rule", "gradients", "NaN"),
    Mutant("jax", "safe_norm", f"{M}:safe_norm_unguarded", "gradients", "at 0: [0, 0, 0] instead of NaN", also=('forward_mode',)),
    Mutant("jax", "safe_norm", f"{M}:safe_norm_custom_vjp", "forward_mode",
           "can't apply forward-mode autodiff (jvp) to a custom_vjp function"),
    Mutant("jax", "safe_norm", f"{M}:safe_norm_jvp_unnormalized", "forward_mode",
           "output tangent vs the reference's J t", also=('gradients',), blocked=('second_order',)),
    Mutant("jax", "safe_norm", f"{M}:safe_norm_jvp_unnormalized", "gradients", "gradient for input 'x'", also=('forward_mode',), blocked=('second_order',)),
    Mutant("jax", "scaled", f"{M}:scaled_grad_for_k", "gradients", "non-differentiable input 'k'"),
    Mutant("jax", "scaled", f"{M}:scaled_forgets_k", "gradients", "the backward rule is scaled wrongly"),
    Mutant("jax", "linear_vjp", f"{M}:linear_no_bias_grad", "gradients", "gradient for input 'b' (case 'square')"),
    Mutant("jax", "linear_vjp", f"{M}:linear_untransposed", "gradients", "gradient for input 'x' (case 'square')", blocked=('second_order',), also=('compiled', 'export')),
    Mutant("jax", "softmax_cross_entropy", f"{M}:softmax_ce_naive", "values", "NaN", blocked=('gradients', 'second_order')),
    Mutant("jax", "softmax_cross_entropy", f"{M}:softmax_ce_grad_to_labels", "gradients",
           "non-differentiable input 'labels'"),
    Mutant("jax", "softmax_cross_entropy", f"{M}:softmax_ce_missing_y", "gradients", "gradient for input 'logits'"),
    Mutant("jax", "fourier_half", f"{M}:FourierRfft", "values", "output shape [4, 9], expected [4, 8]"),
    Mutant("jax", "fourier_half", f"{M}:FourierMagnitude", "values", "dtype float32, expected complex64"),
    Mutant("jax", "clamp_ste", f"{M}:clamp_plain", "gradients", "input 'X' (case 'boundary')"),
    Mutant("jax", "clamp_ste", f"{M}:clamp_ste_inclusive", "gradients", "input 'X' (case 'boundary')"),
    Mutant("jax", "clamp_ste", f"{M}:clamp_ste_grad_to_bounds", "gradients", "non-differentiable input 'lo'"),
    Mutant("jax", "rmsnorm_bias", f"{M}:BiasAlwaysCreated", "strict_loading", "it grows by nothing"),
    Mutant("jax", "rmsnorm_bias", f"{M}:BiasRawArray", "parameters", "untracked attribute 'bias'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization', 'strict_loading')),
    Mutant("jax", "rmsnorm_bias", f"{M}:BiasBeforeScale", "values", "case 'random': mismatched elements", blocked=('gradients',)),
    Mutant("jax", "dropout", f"{M}:DropoutTorchFlag", "modes", "in evaluation mode, switched on the enclosing container",
           blocked=('batching', 'compiled', 'device_parity', 'export', 'gradients', 'native', 'values', 'abstract')),
    Mutant("jax", "dropout", f"{M}:DropoutCallArgument", "modes",
           "in evaluation mode, switched on the enclosing container",
           blocked=('batching', 'compiled', 'device_parity', 'export', 'gradients', 'native', 'values', 'abstract')),
    # the key held as a plain array is the mistake (never advanced): the fresh-mask test is blocked by it
    Mutant("jax", "dropout", f"{M}:DropoutKeyOnce", "parameters", "untracked tensor attribute 'key'",
           blocked=('composition', 'devices', 'modes')),
    Mutant("jax", "dropout", f"{M}:DropoutKeepsP", "modes", "(Hoeffding bound, false-alarm probability 1e-09)"),
    Mutant("jax", "dropout", f"{M}:DropoutNoRescale", "modes", "surviving entries are scaled by 1, expected"),
    Mutant("jax", "checkpointed_tanh_stack", f"{M}:CheckpointClosedOverWeights", "values", "mismatched elements",
           blocked=('gradients',), also=('export',)),
    Mutant("jax", "checkpointed_tanh_stack", f"{M}:CheckpointStopGradient", "gradients", "gradient for slot 'w'"),
    Mutant("jax", "centered", f"{M}:CenteredMedian", "values", "case 'offset': mismatched elements", blocked=('gradients', 'properties')),
    Mutant("jax", "causal_mask", f"{M}:MaskDiagonal", "properties", "on the diagonal changed", also=('buffers',)),
]


# --- second order: a backward rule that is right but not differentiable ------------------------

def _log1pexp_numpy_bwd(x, g):
    # numpy's stable sigmoid exp(-logaddexp(0, -x)): right values, but np.asarray needs a concrete
    # array, and under grad of grad the residual x is a tracer
    return (g * np.exp(-np.logaddexp(0.0, -np.asarray(x))),)


@_vjp(lambda x: (jnp.logaddexp(x, 0.0), x), _log1pexp_numpy_bwd)
def log1pexp_numpy_bwd(x):
    """The bwd rule computes sigmoid with numpy: every first-order check passes, grad of grad raises."""
    return jnp.logaddexp(x, 0.0)


MUTANTS += [
    Mutant("jax", "log1pexp", f"{M}:log1pexp_numpy_bwd", "second_order", "TracerArrayConversionError", also=('compiled', 'export', 'batching')),
]


@jax.custom_jvp
def safe_norm_rule_stops_norm(x):
    """The JVP rule divides by stop_gradient(norm): first order is unchanged, but differentiating
    the rule again misses the norm's own derivative, so the Hessian is wrong (not zero)."""
    return jnp.sqrt(jnp.sum(x * x))


@safe_norm_rule_stops_norm.defjvp
def _safe_norm_rule_stops_norm_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    n = jax.lax.stop_gradient(safe_norm_rule_stops_norm(x))
    return n, jnp.sum(x * t) / jnp.where(n == 0.0, 1.0, n)


MUTANTS += [
    Mutant("jax", "safe_norm", f"{M}:safe_norm_rule_stops_norm", "second_order",
           "Hessian-vector product for input 'x' (case 'random') vs the reference hvp"),
]


# --- mixed precision: params created in dtype instead of param_dtype ---------------------------

class RMSNormParamsInDtype(nnx.Module):
    """Takes flax's dtype/param_dtype but creates the gain in dtype: bfloat16 params under mixed precision."""

    def __init__(self, d, eps=1e-6, *, dtype=None, param_dtype=jnp.float32):
        self.gain = nnx.Param(jnp.ones(d, dtype=dtype or param_dtype))
        self.eps, self.dtype = eps, dtype

    def __call__(self, X):
        X = X.astype(self.dtype) if self.dtype is not None else X
        rms = jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)
        return self.gain[...].astype(X.dtype) * X / rms


MUTANTS += [
    Mutant("jax", "rmsnorm", f"{M}:RMSNormParamsInDtype", "mixed_precision", "'gain' is bfloat16, not float32"),
]


# --- dtypes (the rmsnorm contract's dtypes) --------------------------------------------------------

class RMSNormPromotes(_RMSNorm):
    """Upcasts for the statistic and never casts back: a bfloat16 input gives a float32 output."""
    def __call__(self, X):
        X32 = X.astype(jnp.float32)
        return self.gain[...].astype(jnp.float32) * X32 * jax.lax.rsqrt((X32 ** 2).mean(-1, keepdims=True) + self.eps)


@jax.custom_vjp
def _normalize_grad_float32(X, eps):
    X32 = X.astype(jnp.float32)
    return (X32 * jax.lax.rsqrt((X32 ** 2).mean(-1, keepdims=True) + eps)).astype(X.dtype)


def _normalize_fwd(X, eps):
    return _normalize_grad_float32(X, eps), (X, eps)


def _normalize_bwd(res, g):
    X, eps = res
    X32, g = X.astype(jnp.float32), g.astype(jnp.float32)
    rms = jax.lax.rsqrt((X32 ** 2).mean(-1, keepdims=True) + eps)
    dX = rms * g - X32 * rms ** 3 * (g * X32).sum(-1, keepdims=True) / X.shape[-1]
    return dX, None  # float32 whatever X's dtype: JAX lets a bwd rule's inexact cotangent differ in dtype


_normalize_grad_float32.defvjp(_normalize_fwd, _normalize_bwd)


class RMSNormGradDtype(_RMSNorm):
    """Right values; a custom VJP that hands back the input's gradient in float32 whatever the input's
    dtype: jax.custom_vjp passes an inexact cotangent of another dtype through as it is
    (jax/_src/custom_derivatives.py, _temporary_dtype_exception)."""
    def __call__(self, X):
        return self.gain[...].astype(X.dtype) * _normalize_grad_float32(X, self.eps)


class RMSNormAccumulates16(_RMSNorm):
    """Sums the squares one by one in the input's dtype (lax.scan: a running sum, as a hand-written kernel
    keeps it; jnp.mean would accumulate bfloat16 in float32): in bfloat16 the sum stops growing once a
    term is below 1/256 of it."""
    def __call__(self, X):
        sq = jnp.moveaxis(X * X, -1, 0)
        total, _ = jax.lax.scan(lambda acc, col: (acc + col, None), jnp.zeros_like(sq[0]), sq)
        ms = total[..., None] / X.shape[-1]
        return self.gain[...].astype(X.dtype) * X * jax.lax.rsqrt(ms + jnp.asarray(self.eps, X.dtype))


MUTANTS += [
    Mutant("jax", "rmsnorm", f"{M}:RMSNormPromotes", "values",
           "dtype float32, expected bfloat16 (the output is float32 for bfloat16 inputs: the layer promotes it)",
           dtype="bfloat16", blocked=("native",)),
    Mutant("jax", "rmsnorm", f"{M}:RMSNormGradDtype", "gradients",
           "has dtype float32, expected bfloat16 (the backward promotes the gradient of a bfloat16 value to float32)",
           dtype="bfloat16"),
    Mutant("jax", "rmsnorm_long_rows", f"{M}:RMSNormAccumulates16", "values",
           "the statistics were accumulated in bfloat16 (the contract requires float32 accumulation",
           dtype="bfloat16"),
]


# --- layernorm, gradient_reversal, groupnorm -------------------------------------------------

from layer_conformance.reference_impls.jax.groupnorm import GroupNorm as _GroupNorm  # noqa: E402
from layer_conformance.reference_impls.jax.layernorm import LayerNorm as _LayerNorm  # noqa: E402


class LayerNormBiasBeforeGain(_LayerNorm):
    """(xhat + bias) * gain: the shift applied before the gain."""
    def __call__(self, X):
        Xc = X - X.mean(-1, keepdims=True)
        xhat = Xc / jnp.sqrt((Xc ** 2).mean(-1, keepdims=True) + self.eps)
        return self.gain[...] * (xhat + self.bias[...])


@_vjp(lambda x, lam: (x, None), lambda _, g: (-g, None))
def gradient_reversal_unscaled(x, lam):
    """Reverses but ignores lam: always -g."""
    return x


class GroupNormPerChannel(_GroupNorm):
    """Normalizes each channel on its own (instance norm): the groups are ignored."""
    def __call__(self, X):
        axes = tuple(range(2, X.ndim))
        Xc = X - X.mean(axes, keepdims=True)
        Y = Xc / jnp.sqrt((Xc ** 2).mean(axes, keepdims=True) + self.eps)
        per_channel = (-1,) + (1,) * (X.ndim - 2)
        return self.gain[...].reshape(per_channel) * Y + self.bias[...].reshape(per_channel)


MUTANTS += [
    Mutant("jax", "layernorm", f"{M}:LayerNormBiasBeforeGain", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
    Mutant("jax", "gradient_reversal", f"{M}:gradient_reversal_unscaled", "gradients", "lam = 0.5"),
    Mutant("jax", "groupnorm", f"{M}:GroupNormPerChannel", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
]
