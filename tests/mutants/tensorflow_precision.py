"""Layers whose failure in a dtype is the precision they compute at (layer_conformance.checks.precision): the source
chapter's RMSNorm with its statistic in the input's dtype, and one that computes float64 inputs in float32.
Nothing here runs a TensorFlow op at import time."""
import tensorflow as tf

from layer_conformance.reference_impls.tensorflow.rmsnorm import RMSNorm as _RMSNorm
from tests.mutants.catalogue import Mutant
from tests.mutants.precision_causes import FLOAT32, NARROW

M = "tests.mutants.tensorflow_precision"


class _Width(_RMSNorm):
    """Takes the contract's width, as layers written from the chapter do (Keras would take it from build)."""
    def __init__(self, d=None, eps=1e-6, **kwargs):
        super().__init__(eps=eps, **kwargs)
        self.d = d


class RMSNormChapter(_Width):
    """The source chapter's formula in Keras: the mean square in the input's own dtype."""
    def call(self, X):
        return tf.cast(self.gain, X.dtype) * X * tf.math.rsqrt(
            tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + tf.cast(self.eps, X.dtype))


class RMSNormFloat32Inside(_Width):
    """Computes in float32 whatever the input and casts back: float64 inputs get float32 precision."""
    def call(self, X):
        X32 = tf.cast(X, tf.float32)
        rms = tf.math.rsqrt(tf.reduce_mean(X32 ** 2, axis=-1, keepdims=True) + self.eps)
        return tf.cast(tf.cast(self.gain, tf.float32) * X32 * rms, X.dtype)


MUTANTS = [
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormChapter", "values", NARROW.format(dtype="float16"),
           dtype="float16", blocked=("native", "gradients", "properties")),
    # float32's error passes values' float64 tolerance here (4.0e-7 on the bundled cases), not the gradients'
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormFloat32Inside", "gradients", FLOAT32, dtype="float64"),
]
