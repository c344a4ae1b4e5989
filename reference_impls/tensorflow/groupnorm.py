import tensorflow as tf


class GroupNorm(tf.keras.layers.Layer):
    # channels first, X: [N, C, ...]; the channel count is known only at build time
    def __init__(self, groups, eps=1e-5, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.groups = groups
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[1]], initializer="ones")
        self.bias = self.add_weight(name="bias", shape=[X_shape[1]], initializer="zeros")

    def call(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = tf.cast(X, tf.float32) if X.dtype in (tf.float16, tf.bfloat16) else X
        shape = tf.shape(X)
        # consecutive channels form a group: [N, G, C/G * positions]
        Xg = tf.reshape(X32, tf.stack([shape[0], self.groups, -1]))
        Xc = Xg - tf.reduce_mean(Xg, axis=-1, keepdims=True)
        var = tf.reduce_mean(Xc ** 2, axis=-1, keepdims=True)  # two passes, the biased variance
        Y = tf.cast(tf.reshape(Xc * tf.math.rsqrt(var + self.eps), shape), X.dtype)
        per_channel = [-1] + [1] * (len(X.shape) - 2)
        return tf.reshape(self.gain, per_channel) * Y + tf.reshape(self.bias, per_channel)

    def get_config(self):
        return {**super().get_config(), "groups": self.groups, "eps": self.eps}


IMPL = GroupNorm
