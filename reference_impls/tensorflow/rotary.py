import tensorflow as tf


def rotate_half(x):
    # the halves pair up (Llama, GPT-NeoX): feature i with feature i + head_dim/2, not 2i with 2i + 1
    h = x.shape[-1] // 2
    return tf.concat([-x[..., h:], x[..., :h]], axis=-1)


class Rotary(tf.keras.layers.Layer):
    """X: [batch, heads, seq, head_dim], positions 0..seq-1 on the second to last axis."""
    rotate_half = staticmethod(rotate_half)

    def __init__(self, head_dim, base=10000.0, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.head_dim = head_dim
        self.base = base

    def cos_sin(self, seq, dtype):
        # inv_freq and the angles in float32 at least, from the constructor's numbers: no floating state for a
        # cast to 16 bits to round (a position multiplies inv_freq's rounding)
        exponents = tf.range(0, self.head_dim, 2, dtype=dtype) / self.head_dim
        inv_freq = 1.0 / tf.pow(tf.constant(self.base, dtype), exponents)
        angles = tf.range(seq, dtype=dtype)[:, None] * inv_freq[None, :]
        angles = tf.concat([angles, angles], axis=-1)
        return tf.cos(angles), tf.sin(angles)

    def call(self, X):
        wide = tf.float64 if X.dtype == tf.float64 else tf.float32
        cos, sin = self.cos_sin(tf.shape(X)[-2], wide)
        Xw = tf.cast(X, wide)
        return tf.cast(Xw * cos + self.rotate_half(Xw) * sin, X.dtype)  # rounded once, to the input's dtype

    def get_config(self):
        return {**super().get_config(), "head_dim": self.head_dim, "base": self.base}


IMPL = Rotary
