"""Correct Keras 3 layers that compute at a fixed precision (tests/test_zoo.py)."""
import keras
from keras import ops

from tests.mutants.base_tensorflow import RMSNorm


class RMSNormUpcast(keras.layers.Layer):
    """Normalizes in float32 whatever the input's dtype, casts back, then scales (the pattern of
    Llama ports to Keras)."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.scale = self.add_weight(name="scale", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        x = ops.cast(X, "float32")
        x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.eps)
        return ops.cast(x, X.dtype) * ops.cast(self.scale, X.dtype)


class RMSNormFloat32(RMSNorm):
    """Everything, the gain included, in float32; the result in the input's dtype (the mutants' correct Keras
    RMSNorm with its call in float32)."""
    def call(self, X):
        x = ops.cast(X, "float32")
        y = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.eps) * ops.cast(self.gain, "float32")
        return ops.cast(y, X.dtype)
