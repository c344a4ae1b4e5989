import tensorflow as tf


class RMSNorm(tf.keras.layers.Layer):
    # The width is known only at build time, from the first input
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        rms = tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + self.eps)
        return self.gain * X * rms


IMPL = RMSNorm
