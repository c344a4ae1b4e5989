import tensorflow as tf


class RMSNorm(tf.keras.layers.Layer):
    def __init__(self, eps=1e-6, bias=False, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.eps = eps
        self.use_bias = bias

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")
        # without the flag no weight is created: get_weights() has one entry fewer
        self.bias = self.add_weight(name="bias", shape=[X_shape[-1]], initializer="zeros") \
            if self.use_bias else None

    def call(self, X):
        # the statistic in float32 at least (the contract's accumulate: float32): in 16 bits a mean
        # square underflows and loses its digits
        X32 = tf.cast(X, tf.float32) if X.dtype in (tf.float16, tf.bfloat16) else X
        rms = tf.math.rsqrt(tf.reduce_mean(X32 ** 2, axis=-1, keepdims=True) + self.eps)
        Y = self.gain * tf.cast(X32 * rms, X.dtype)
        return Y if self.bias is None else Y + self.bias


IMPL = RMSNorm
