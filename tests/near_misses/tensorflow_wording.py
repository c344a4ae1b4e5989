"""Keras 3 layers and TF functions for tests/test_hints.py whose hints must speak Keras's words (no TF op at import)."""
import tensorflow as tf
from keras import ops

from layer_conformance.reference_impls.tensorflow.rmsnorm import RMSNorm as _ReferenceRMSNorm


class BatchFromStaticShape(_ReferenceRMSNorm):
    """RMSNorm that reads the batch size as int(X.shape[0]) to reshape its rows: right eagerly, but in a graph with
    a symbolic batch (tf.function with a None batch dimension, a functional model) X.shape[0] is None."""
    def call(self, X):
        n = int(X.shape[0])
        rows = ops.reshape(X, (n, X.shape[-1]))
        y = rows * ops.rsqrt(ops.mean(rows ** 2, axis=-1, keepdims=True) + self.eps)
        return self.gain * ops.reshape(y, ops.shape(X))


class _RMSNorm(_ReferenceRMSNorm):
    """The bundled correct RMSNorm under a class name that starts with '_': Keras names the layer '_rms_norm', which
    TensorFlow refuses as a name scope at the root of a tf.function's graph, so the layer cannot run compiled."""


@tf.custom_gradient
def log1pexp_naive(x):
    """log(1 + exp(x)) as it reads, with the stable gradient: exp(x) overflows float16 beyond x = 11."""
    def grad(upstream):
        return upstream * tf.sigmoid(x)
    return tf.math.log1p(tf.exp(x)), grad
