import math

import tensorflow as tf


class SwiGLU(tf.keras.layers.Layer):
    gate = staticmethod(tf.nn.silu)  # the gate's activation (GeGLU: the exact gelu)

    def __init__(self, d, hidden, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.d = d
        self.hidden = hidden

    def build(self, X_shape):
        # the weights held [in, out], as the contract lays them out: y = x @ w; a normal of std 1/sqrt(fan_in),
        # drawn by Keras' seeded initializers
        def weight(name, fan_in, fan_out):
            init = tf.keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(fan_in))
            return self.add_weight(name=name, shape=[fan_in, fan_out], initializer=init)
        self.w1 = weight("w1", self.d, self.hidden)
        self.w3 = weight("w3", self.d, self.hidden)
        self.w2 = weight("w2", self.hidden, self.d)

    def call(self, X):
        # silu gates the w1 branch; the up branch x @ w3 is linear. tf.matmul broadcasts a batch of any rank
        return tf.matmul(self.gate(tf.matmul(X, self.w1)) * tf.matmul(X, self.w3), self.w2)

    def get_config(self):
        return {**super().get_config(), "d": self.d, "hidden": self.hidden}


IMPL = SwiGLU
