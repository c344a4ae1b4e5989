"""Keras 3 layers and TF functions for tests/test_hints.py whose hints must speak Keras's words (no TF op at import)."""
import keras
import tensorflow as tf
from keras import ops


class BatchFromStaticShape(keras.layers.Layer):
    """RMSNorm that reads the batch size as int(X.shape[0]) to reshape its rows: right eagerly, but in a graph with
    a symbolic batch (tf.function with a None batch dimension, a functional model) X.shape[0] is None."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        n = int(X.shape[0])
        rows = ops.reshape(X, (n, X.shape[-1]))
        y = rows * ops.rsqrt(ops.mean(rows ** 2, axis=-1, keepdims=True) + self.eps)
        return self.gain * ops.reshape(y, ops.shape(X))


class _RMSNorm(keras.layers.Layer):
    """A correct RMSNorm whose class name starts with '_': Keras names the layer '_rms_norm', which TensorFlow
    refuses as a name scope at the root of a tf.function's graph, so the layer cannot run compiled at all."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * ops.rsqrt(ops.mean(X ** 2, axis=-1, keepdims=True) + self.eps)


@tf.custom_gradient
def log1pexp_naive(x):
    """log(1 + exp(x)) as it reads, with the stable gradient: exp(x) overflows float16 beyond x = 11."""
    def grad(upstream):
        return upstream * tf.sigmoid(x)
    return tf.math.log1p(tf.exp(x)), grad
