import tensorflow as tf


class LayerNorm(tf.keras.layers.Layer):
    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")
        self.bias = self.add_weight(name="bias", shape=[X_shape[-1]], initializer="zeros")

    def call(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = tf.cast(X, tf.float32) if X.dtype in (tf.float16, tf.bfloat16) else X
        Xc = X32 - tf.reduce_mean(X32, axis=-1, keepdims=True)
        # two passes: the mean first, then the mean square of the centred values (no E[x^2] - E[x]^2)
        var = tf.reduce_mean(Xc ** 2, axis=-1, keepdims=True)
        Y = tf.cast(Xc * tf.math.rsqrt(var + self.eps), X.dtype)
        return self.gain * Y + self.bias

    def get_config(self):
        return {**super().get_config(), "eps": self.eps}


IMPL = LayerNorm
