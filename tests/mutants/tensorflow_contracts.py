"""Broken TensorFlow / Keras 3 implementations of the custom-function and exercise contracts, each
breaking the contract's characteristic property; tests/test_mutants.py runs them.

Nothing here runs a TensorFlow op at import time: the adapter configures devices first.
"""
import numpy as np
import tensorflow as tf
from tensorflow import keras

from layer_conformance.reference_impls.tensorflow.checkpointed_tanh_stack import CheckpointedTanhStack as _Stack
from layer_conformance.reference_impls.tensorflow.rmsnorm_bias import RMSNorm as _RMSNormBias
from tests.mutants.base_tensorflow import CausalMask, Dropout, RMSNorm
from tests.mutants.catalogue import Mutant


def _safe(n):
    return tf.where(n == 0, tf.ones_like(n), n)


def _rms(X, eps):
    return tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + eps)


# --- sign_ste, clipped_relu_grad, scaled_tanh ------------------------------------------------

def sign_plain(x):
    """No @tf.custom_gradient: tf.sign's registered gradient is zero, so nothing passes through."""
    return tf.sign(x)


@tf.custom_gradient
def sign_hardtanh_ste(x):
    """A different estimator: the gradient only where |x| <= 1 (hardtanh STE), not the identity."""
    def grad(upstream):
        return upstream * tf.cast(tf.abs(x) <= 1, upstream.dtype)
    return tf.sign(x), grad


@tf.custom_gradient
def clipped_relu_no_clip(x):
    """The ReLU gradient without the clipping."""
    def grad(upstream):
        return upstream * tf.cast(x > 0, upstream.dtype)
    return tf.maximum(x, 0.0), grad


@tf.custom_gradient
def clipped_relu_grad_at_zero(x):
    """x >= 0 instead of x > 0: a gradient passes at exactly zero."""
    def grad(upstream):
        return tf.clip_by_value(upstream * tf.cast(x >= 0, upstream.dtype), -1.0, 1.0)
    return tf.maximum(x, 0.0), grad


@tf.custom_gradient
def scaled_tanh_unscaled(x):
    """Forgets the 0.5: tanh's true gradient."""
    y = tf.tanh(x)

    def grad(upstream):
        return upstream * (1 - tf.square(y))
    return y, grad


# --- log1pexp, safe_norm, scaled ------------------------------------------------------------

def log1pexp_plain_autodiff(x):
    """The formula without the custom rule: the tape divides inf by inf at x = 1000 (NaN)."""
    return tf.math.log(1.0 + tf.exp(x))


@tf.custom_gradient
def log1pexp_quotient_rule(x):
    """A custom rule that writes out the unstable quotient exp(x) / (1 + exp(x)) instead of sigmoid."""
    def grad(upstream):
        e = tf.exp(x)
        return upstream * e / (1.0 + e)
    return tf.math.softplus(x), grad


@tf.function(reduce_retracing=True)
@tf.custom_gradient
def safe_norm_unguarded(x):
    """x / norm without the where: 0 / 0 = NaN at the origin."""
    n = tf.sqrt(tf.reduce_sum(x * x))

    def grad(g):
        return g * x / n
    return n, grad


@tf.custom_gradient
def safe_norm_eager(x):
    """The right rule, but not in a tf.function: ForwardAccumulator then differentiates the forward
    ops themselves (sqrt at 0: NaN) instead of transposing the custom gradient."""
    n = tf.sqrt(tf.reduce_sum(x * x))

    def grad(g):
        return g * x / _safe(n)
    return n, grad


@tf.custom_gradient
def scaled_grad_for_k(k, x):
    """Returns the true derivative for the setting k instead of None."""
    def grad(g):
        return tf.reduce_sum(g * x), k * g
    return k * x, grad


@tf.custom_gradient
def scaled_forgets_k(k, x):
    """Passes g through unscaled."""
    def grad(g):
        return None, g
    return k * x, grad


# --- linear_vjp, softmax_cross_entropy ------------------------------------------------------

@tf.custom_gradient
def linear_no_bias_grad(W, x, b):
    """Returns None for b: the bias never learns."""
    def grad(g):
        return tf.tensordot(g, x, axes=0), tf.linalg.matvec(W, g, transpose_a=True), None
    return tf.linalg.matvec(W, x) + b, grad


@tf.custom_gradient
def linear_untransposed(W, x, b):
    """W g instead of W^T g: same shape for a square W, wrong numbers."""
    def grad(g):
        return tf.tensordot(g, x, axes=0), tf.linalg.matvec(W, g), g
    return tf.linalg.matvec(W, x) + b, grad


def softmax_ce_naive(logits, labels):
    """exp without the max shift: exp(1e4) = inf, inf / inf = NaN."""
    p = tf.exp(logits) / tf.reduce_sum(tf.exp(logits), axis=-1, keepdims=True)
    return -tf.reduce_sum(labels * tf.math.log(p), axis=-1)


def softmax_ce_builtin(logits, labels):
    """TF's own op, which also backpropagates into the labels (-log p)."""
    return tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)


@tf.custom_gradient
def softmax_ce_grad_to_labels(logits, labels):
    """Returns -g log p for the labels instead of None."""
    log_p = tf.nn.log_softmax(logits, axis=-1)

    def grad(g):
        return g[..., None] * (tf.exp(log_p) - labels), -g[..., None] * log_p
    return -tf.reduce_sum(labels * log_p, axis=-1), grad


@tf.custom_gradient
def softmax_ce_missing_y(logits, labels):
    """Returns p instead of p - y."""
    log_p = tf.nn.log_softmax(logits, axis=-1)

    def grad(g):
        return g[..., None] * tf.exp(log_p), None
    return -tf.reduce_sum(labels * log_p, axis=-1), grad


# --- fourier_half, clamp_ste ----------------------------------------------------------------

class FourierRfft(keras.layers.Layer):
    """rfft keeps n // 2 + 1 coefficients: one more than half."""
    def call(self, X):
        return tf.signal.rfft(X)


class FourierDouble(keras.layers.Layer):
    """Transforms in complex128: complex128 output for float32 input."""
    def call(self, X):
        return tf.signal.fft(tf.cast(X, tf.complex128))[..., : X.shape[-1] // 2]


@tf.custom_gradient
def clamp_ste_inclusive(X, lo, hi):
    """lo <= X <= hi: passes the gradient on the boundary, as the native tf.clip_by_value does."""
    def grad(upstream):
        inside = tf.logical_and(X >= lo, X <= hi)
        return upstream * tf.cast(inside, upstream.dtype), None, None
    return tf.clip_by_value(X, lo, hi), grad


@tf.custom_gradient
def clamp_ste_grad_to_bounds(X, lo, hi):
    """Also returns gradients for the bounds lo and hi, which the contract says get none."""
    def grad(upstream):
        inside = tf.cast(tf.logical_and(X > lo, X < hi), upstream.dtype)
        return (upstream * inside, tf.reduce_sum(upstream * tf.cast(X <= lo, upstream.dtype)),
                tf.reduce_sum(upstream * tf.cast(X >= hi, upstream.dtype)))
    return tf.clip_by_value(X, lo, hi), grad


# --- rmsnorm_bias ----------------------------------------------------------------------------

class BiasAlwaysCreated(_RMSNormBias):
    """Creates the bias whatever the flag says (and only uses it when asked): get_weights() does
    not change length, so a bias-free checkpoint is indistinguishable."""
    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")
        self.bias = self.add_weight(name="bias", shape=[X_shape[-1]], initializer="zeros")

    def call(self, X):
        Y = self.gain * X * _rms(X, self.eps)
        return Y + self.bias if self.use_bias else Y


class BiasTolerantLoad(_RMSNormBias):
    """"Backward compatibility": set_weights fills a missing bias with zeros, so a weight list
    saved without it loads silently."""
    def set_weights(self, weights):
        if self.bias is not None and len(weights) == 1:
            weights = list(weights) + [np.zeros(self.bias.shape, dtype=self.bias.dtype)]
        super().set_weights(weights)


class BiasBeforeScale(_RMSNormBias):
    """(x * r + bias) * gain: the shift applied before the scale."""
    def call(self, X):
        return self.gain * (X * _rms(X, self.eps) + (0 if self.bias is None else self.bias))


# --- dropout ---------------------------------------------------------------------------------

class DropoutOwnFlag(Dropout):
    """Consults its own flag, set once in __init__: training=False on the model never reaches it."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(p, **kwargs)
        self.is_training = True

    def call(self, X):
        return self.drop(X) if self.is_training else X


class DropoutFlagMisnamed(Dropout):
    """Its call takes `train`, not `training`: Keras passes the mode only under the name `training`,
    so the default (True) always wins."""
    def call(self, X, train=True):
        return self.drop(X) if train else X


class DropoutKeepsP(Dropout):
    """Keeps with probability p instead of dropping with it."""
    def drop(self, X):
        return X * tf.cast(tf.random.uniform(tf.shape(X)) < self.p, X.dtype) / self.p


class DropoutNoRescale(Dropout):
    """Zeroes but does not rescale the survivors: the expected activation shrinks in training."""
    def drop(self, X):
        return X * self.keep(X)


class DropoutStatelessSeed(Dropout):
    """A stateless draw with a fixed seed: the same mask on every call."""
    def keep(self, X):
        return tf.cast(tf.random.stateless_uniform(tf.shape(X), seed=[1, 2]) >= self.p, X.dtype)


# --- checkpointed_tanh_stack -----------------------------------------------------------------

class CheckpointStaleWeights(_Stack):
    """The checkpointed step reads a weight scale from an attribute that call() changes after the
    stack: the recomputation during backward runs with other weights than forward did."""
    def call(self, h):
        self.w_scale = 1.0

        def step(h):
            return tf.tanh(h @ (self.w * self.w_scale) + self.b)

        def grad_step(h):
            return tf.recompute_grad(step)(h)
        for _ in range(self.depth):
            h = grad_step(h)
        self.w_scale = 0.5  # "decayed" for the next call: backward recomputes with this
        return h


# --- properties: centered, causal_mask -------------------------------------------------------

class CenteredMedian(keras.layers.Layer):
    """Centers on the median, a robust statistic: the mean of the output is not zero."""
    def call(self, X):
        flat = tf.sort(tf.reshape(X, [-1]))
        return X - flat[tf.size(flat) // 2]


class MaskDiagonal(CausalMask):
    """>= instead of >: masks the diagonal too, so a query cannot see its own position."""
    def masked(self, n):
        return tf.range(n)[None, :] >= tf.range(n)[:, None]


F = "tensorflow"
M = "tests.mutants.tensorflow_contracts"
MUTANTS = [
    Mutant(F, "sign_ste", f"{M}:sign_plain", "gradients", "no custom backward rule ran"),
    Mutant(F, "sign_ste", f"{M}:sign_hardtanh_ste", "gradients", "gradient for 'x' in the worked example"),
    Mutant(F, "clipped_relu_grad", f"{M}:clipped_relu_no_clip", "gradients",
           "in the worked example: large upstream gradients are clipped"),
    Mutant(F, "clipped_relu_grad", f"{M}:clipped_relu_grad_at_zero", "gradients", "at index (2,)"),
    Mutant(F, "scaled_tanh", f"{M}:scaled_tanh_unscaled", "gradients", "2x the expected one everywhere"),
    Mutant(F, "log1pexp", f"{M}:log1pexp_plain_autodiff", "gradients", "NaN"),
    Mutant(F, "log1pexp", f"{M}:log1pexp_quotient_rule", "gradients", "NaN"),
    Mutant(F, "safe_norm", f"{M}:safe_norm_unguarded", "gradients", "at 0: [0, 0, 0] instead of NaN", also=('forward_mode',)),
    Mutant(F, "safe_norm", f"{M}:safe_norm_eager", "forward_mode", "at 0 the tangent is 0, not NaN"),
    Mutant(F, "scaled", f"{M}:scaled_grad_for_k", "gradients", "non-differentiable input 'k'"),
    Mutant(F, "scaled", f"{M}:scaled_forgets_k", "gradients", "the backward rule is scaled wrongly"),
    Mutant(F, "linear_vjp", f"{M}:linear_no_bias_grad", "gradients", "no gradient reached 'b'"),
    Mutant(F, "linear_vjp", f"{M}:linear_untransposed", "gradients", "gradient for input 'x' (case 'square')", blocked=('second_order',), also=('compiled', 'export')),
    Mutant(F, "softmax_cross_entropy", f"{M}:softmax_ce_naive", "values", "NaN", blocked=('gradients', 'second_order')),
    Mutant(F, "softmax_cross_entropy", f"{M}:softmax_ce_builtin", "gradients", "non-differentiable input 'labels'"),
    Mutant(F, "softmax_cross_entropy", f"{M}:softmax_ce_grad_to_labels", "gradients",
           "non-differentiable input 'labels'"),
    Mutant(F, "softmax_cross_entropy", f"{M}:softmax_ce_missing_y", "gradients", "gradient for input 'logits'"),
    Mutant(F, "fourier_half", f"{M}:FourierRfft", "values", "output shape [4, 9], expected [4, 8]"),
    Mutant(F, "fourier_half", f"{M}:FourierDouble", "values", "dtype complex128, expected complex64"),
    Mutant(F, "clamp_ste", f"{M}:clamp_ste_inclusive", "gradients", "input 'X' (case 'boundary')"),
    Mutant(F, "clamp_ste", f"{M}:clamp_ste_grad_to_bounds", "gradients", "non-differentiable input 'lo'"),
    Mutant(F, "rmsnorm_bias", f"{M}:BiasAlwaysCreated", "strict_loading", "it grows by nothing"),
    Mutant(F, "rmsnorm_bias", f"{M}:BiasTolerantLoad", "strict_loading",
           "loaded strictly into the layer without an error"),
    Mutant(F, "rmsnorm_bias", f"{M}:BiasBeforeScale", "values", "case 'random': mismatched elements", blocked=('gradients',)),
    Mutant(F, "dropout", f"{M}:DropoutOwnFlag", "modes", "in evaluation mode, switched on the enclosing container", blocked=('batching', 'compiled', 'device_parity', 'devices', 'export', 'gradients', 'native', 'serialization', 'values', 'abstract')),
    Mutant(F, "dropout", f"{M}:DropoutFlagMisnamed", "modes",
           "in evaluation mode, switched on the enclosing container", blocked=('batching', 'compiled', 'device_parity', 'devices', 'export', 'gradients', 'native', 'serialization', 'values', 'abstract')),
    Mutant(F, "dropout", f"{M}:DropoutKeepsP", "modes", "(Hoeffding bound, false-alarm probability 1e-09)"),
    Mutant(F, "dropout", f"{M}:DropoutNoRescale", "modes", "surviving entries are scaled by 1, expected"),
    Mutant(F, "dropout", f"{M}:DropoutStatelessSeed", "modes", "not drawn afresh per call"),
    Mutant(F, "checkpointed_tanh_stack", f"{M}:CheckpointStaleWeights", "gradients", "gradient for slot 'w'"),
    Mutant(F, "centered", f"{M}:CenteredMedian", "values", "case 'offset': mismatched elements", blocked=('gradients', 'properties')),
    Mutant(F, "causal_mask", f"{M}:MaskDiagonal", "properties", "on the diagonal changed", also=('buffers',)),
]


# --- second order: a backward rule that is right but not differentiable ------------------------

@tf.custom_gradient
def log1pexp_numpy_grad(x):
    """The gradient function computes sigmoid with numpy on x.numpy(): first order is right
    (eagerly), but the outer tape sees a constant, so grad of grad is lost."""
    def grad(upstream):
        return upstream * tf.constant(np.exp(-np.logaddexp(0.0, -x.numpy())))
    return tf.maximum(x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x))), grad


MUTANTS += [
    Mutant(F, "log1pexp", f"{M}:log1pexp_numpy_grad", "second_order",
           "Hessian-vector product for input 'x' (case 'random') is None", also=('compiled', 'export', 'batching')),
]


# --- mixed precision: variables created in the compute dtype, a policy not taken ---------------

class RMSNormComputeDtypeWeights(RMSNorm):
    """add_weight(dtype=self.compute_dtype): under mixed_float16 the gain is a float16 variable."""
    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones", dtype=self.compute_dtype)


class RMSNormDropsDtype(RMSNorm):
    """Swallows its keyword arguments (dtype among them): the layer never takes the policy it is given."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(eps)


MUTANTS += [
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormComputeDtypeWeights", "mixed_precision",
           "'gain' is float16, not float32"),
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormDropsDtype", "mixed_precision",
           "the layer's compute dtype is float32, not float16"),
]


# --- dtypes (the rmsnorm contract's dtypes) --------------------------------------------------------

import tensorflow as _tf  # noqa: E402


class RMSNormGradDtype(RMSNorm):
    """Right values; a custom gradient that hands back the input's gradient in float32 whatever the
    input's dtype (tf.custom_gradient passes it on as it is)."""
    def call(self, X):
        eps = self.eps

        @_tf.custom_gradient
        def normalize(X):
            X32 = _tf.cast(X, _tf.float32)
            rms = _tf.math.rsqrt(_tf.reduce_mean(X32 ** 2, axis=-1, keepdims=True) + eps)

            def grad(g):
                g = _tf.cast(g, _tf.float32)
                d = _tf.cast(_tf.shape(X32)[-1], _tf.float32)
                return rms * g - X32 * rms ** 3 * _tf.reduce_sum(g * X32, axis=-1, keepdims=True) / d
            return _tf.cast(X32 * rms, X.dtype), grad
        return self.gain * normalize(X)


MUTANTS += [
    Mutant(F, "rmsnorm", "tests.mutants.tensorflow_contracts:RMSNormGradDtype", "gradients",
           "has dtype float32, expected bfloat16 (the backward promotes the gradient of a bfloat16 value to float32)",
           dtype="bfloat16"),
]


class RMSNormPromotes(RMSNorm):
    """Upcasts for the statistic and never casts back: a bfloat16 input gives a float32 output."""
    def call(self, X):
        X32 = _tf.cast(X, _tf.float32)
        rms = _tf.math.rsqrt(_tf.reduce_mean(X32 ** 2, axis=-1, keepdims=True) + self.eps)
        return _tf.cast(self.gain, _tf.float32) * X32 * rms


@_tf.function(reduce_retracing=True)  # a graph loop: eager foldl runs 4096 Python steps per call
def _running_sum(columns):
    return _tf.foldl(lambda acc, col: acc + col, columns, initializer=_tf.zeros_like(columns[0]))


class RMSNormAccumulates16(RMSNorm):
    """Sums the squares one by one in the input's dtype (tf.foldl: a running sum, as a hand-written kernel
    keeps it): in bfloat16 the sum stops growing once a term is below 1/256 of it."""
    def call(self, X):
        sq = _tf.reshape(X * X, [-1, _tf.shape(X)[-1]])
        total = _running_sum(_tf.transpose(sq))
        ms = _tf.reshape(total, _tf.concat([_tf.shape(X)[:-1], [1]], 0)) / _tf.cast(_tf.shape(X)[-1], X.dtype)
        return self.gain * X * _tf.math.rsqrt(ms + _tf.cast(self.eps, X.dtype))


MUTANTS += [
    Mutant(F, "rmsnorm", "tests.mutants.tensorflow_contracts:RMSNormPromotes", "values",
           "dtype float32, expected bfloat16 (the output is float32 for bfloat16 inputs: the layer promotes it)",
           dtype="bfloat16", blocked=("native",)),
    Mutant(F, "rmsnorm_long_rows", "tests.mutants.tensorflow_contracts:RMSNormAccumulates16", "values",
           "the statistics were accumulated in bfloat16 (the contract requires float32 accumulation",
           dtype="bfloat16"),
]


# --- layernorm, gradient_reversal, groupnorm -------------------------------------------------

from layer_conformance.reference_impls.tensorflow.groupnorm import GroupNorm as _GroupNorm  # noqa: E402
from layer_conformance.reference_impls.tensorflow.layernorm import LayerNorm as _LayerNorm  # noqa: E402


class LayerNormUnbiasedVariance(_LayerNorm):
    """tf.math.reduce_std's spread rescaled to the unbiased (1/(d-1)) variance, where LayerNorm divides by d."""
    def call(self, X):
        d = X.shape[-1]
        Xc = X - tf.reduce_mean(X, axis=-1, keepdims=True)
        var = tf.reduce_sum(Xc ** 2, axis=-1, keepdims=True) / (d - 1)
        return self.gain * Xc * tf.math.rsqrt(var + self.eps) + self.bias


@tf.custom_gradient
def gradient_reversal_not_flipped(x, lam):
    """Scales by lam but forgets the minus: the gradient is not reversed."""
    def grad(upstream):
        return tf.cast(lam, upstream.dtype) * upstream, None
    return tf.identity(x), grad


class GroupNormStridedGroups(_GroupNorm):
    """Groups channels c, c + G, c + 2G, ... (a reshape to [N, C/G, G, ...]) instead of consecutive ones."""
    def call(self, X):
        shape = tf.shape(X)
        Xg = tf.reshape(X, tf.stack([shape[0], -1, self.groups, tf.reduce_prod(shape[2:])]))
        mean = tf.reduce_mean(Xg, axis=[1, 3], keepdims=True)
        var = tf.reduce_mean((Xg - mean) ** 2, axis=[1, 3], keepdims=True)
        Y = tf.reshape((Xg - mean) * tf.math.rsqrt(var + self.eps), shape)
        per_channel = [-1] + [1] * (len(X.shape) - 2)
        return tf.reshape(self.gain, per_channel) * Y + tf.reshape(self.bias, per_channel)


MUTANTS += [
    Mutant(F, "layernorm", f"{M}:LayerNormUnbiasedVariance", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
    Mutant(F, "gradient_reversal", f"{M}:gradient_reversal_not_flipped", "gradients",
           "gradient for 'x' in the worked example"),
    Mutant(F, "groupnorm", f"{M}:GroupNormStridedGroups", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
]
