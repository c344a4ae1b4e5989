"""Layers whose failure in a dtype is the precision they compute at (layer_conformance.checks.precision): the source
chapter's RMSNorm with its statistic in the input's dtype, and one that computes float64 inputs in float32.
Nothing here runs a TensorFlow op at import time."""
import tensorflow as tf

from tests.mutants.base_tensorflow import RMSNormOfWidth
from tests.mutants.catalogue import Mutant
from tests.mutants.precision_causes import FLOAT32, NARROW

M = "tests.mutants.tensorflow_precision"


class _Width(RMSNormOfWidth):
    """Told the contract's width where a binding gives it (tests/test_precision_cause.py maps d away)."""
    def __init__(self, d=None, eps=1e-6, **kwargs):
        super().__init__(d, eps=eps, **kwargs)


class RMSNormChapter(_Width):
    """The source chapter's formula in Keras: the mean square in the input's own dtype."""
    def call(self, X):
        return tf.cast(self.gain, X.dtype) * X * tf.math.rsqrt(
            tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + tf.cast(self.eps, X.dtype))


class RMSNormFloat32Inside(_Width):
    """Computes in float32 whatever the input and casts back: float64 inputs get float32 precision. Its output
    is the float32 result at its best (the exact value rounded to float32 once, within half an ulp: inside
    values' float64 tolerance on every CPU, where a float32 forward's few roundings miss it by a hair on some
    and meet it on others); its gradient is computed in float32, which gradients' tolerance does not hold."""
    def call(self, X):
        eps = self.eps

        @tf.custom_gradient
        def rmsnorm(X, gain):
            wide = tf.float64 if X.dtype == tf.float64 else tf.float32
            Xw = tf.cast(X, wide)
            rms = tf.math.rsqrt(tf.reduce_mean(Xw ** 2, axis=-1, keepdims=True) + tf.cast(eps, wide))
            y = tf.cast(tf.cast(tf.cast(gain, wide) * Xw * rms, tf.float32), X.dtype)

            def grad(g):
                X32, g32, gain32 = (tf.cast(t, tf.float32) for t in (X, g, gain))
                r32 = tf.math.rsqrt(tf.reduce_mean(X32 ** 2, axis=-1, keepdims=True) + eps)
                n32 = X32 * r32
                gn = g32 * gain32
                dX = r32 * (gn - n32 * tf.reduce_mean(gn * n32, axis=-1, keepdims=True))
                dgain = tf.reduce_sum(tf.reshape(g32 * n32, [-1, tf.shape(X32)[-1]]), axis=0)
                return tf.cast(dX, X.dtype), tf.cast(dgain, gain.dtype)
            return y, grad
        return rmsnorm(X, tf.convert_to_tensor(self.gain))


MUTANTS = [
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormChapter", "values", NARROW.format(dtype="float16"),
           dtype="float16", blocked=("native", "gradients", "properties")),
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormFloat32Inside", "gradients", FLOAT32, dtype="float64"),
]
