"""Keras layers that run but do not come back from a .keras file (the export check)."""
import keras
import tensorflow as tf

from tests.mutants.catalogue import Mutant


class NoKwargs(keras.layers.Layer):
    """__init__ without **kwargs: from_config passes name, dtype and trainable back and it refuses them."""
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + self.eps)


class ConfigWithoutArguments(keras.layers.Layer):
    """get_config() overridden without the constructor's arguments: from_config cannot call __init__."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.d, self.eps = d, eps
        self.gain = self.add_weight(name="gain", shape=[d], initializer="ones")

    def get_config(self):
        return super().get_config()  # an override drops Keras's automatic config of d and eps

    def call(self, X):
        return self.gain * X * tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + self.eps)


MUTANTS = [
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:NoKwargs", "export",
           "__init__ must accept **kwargs"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:ConfigWithoutArguments", "export",
           "get_config() must return every constructor argument"),
]
