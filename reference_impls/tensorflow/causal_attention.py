import math

import tensorflow as tf


class CausalAttention(tf.keras.layers.Layer):
    def __init__(self, d, heads, max_len, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.d = d
        self.heads = heads
        self.max_len = max_len

    def build(self, X_shape):
        # the weights held [in, out], as the contract lays them out: q = X @ wq; Keras Dense's start (Glorot
        # uniform), drawn by Keras' seeded initializers
        def weight(name):
            return self.add_weight(name=name, shape=[self.d, self.d], initializer="glorot_uniform")
        self.wq, self.wk, self.wv, self.wo = (weight(n) for n in ("wq", "wk", "wv", "wo"))
        # the causal mask precomputed once for the longest sequence, sliced per call: non-trainable state
        n = self.max_len
        self.mask = self.add_weight(name="mask", shape=(n, n), dtype=tf.bool, trainable=False, initializer="zeros")
        self.mask.assign(tf.range(n)[None, :] > tf.range(n)[:, None])

    def split(self, t):
        """[..., T, d] -> [..., heads, T, head_dim]: head h holds features h*head_dim .. (h+1)*head_dim - 1."""
        rank = len(t.shape)
        t = tf.reshape(t, tf.concat([tf.shape(t)[:-1], [self.heads, self.d // self.heads]], 0))
        return tf.transpose(t, list(range(rank - 2)) + [rank - 1, rank - 2, rank])

    def merge(self, t):
        """[..., heads, T, head_dim] -> [..., T, d]: the heads concatenated back in order."""
        rank = len(t.shape)
        t = tf.transpose(t, list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1])
        return tf.reshape(t, tf.concat([tf.shape(t)[:-2], [self.d]], 0))

    def scores(self, q, k):
        T = tf.shape(q)[-2]
        additive = tf.where(self.mask[:T, :T], tf.constant(-math.inf, q.dtype), tf.constant(0.0, q.dtype))
        return tf.matmul(q, k, transpose_b=True) / math.sqrt(self.d // self.heads) + additive

    def attend(self, q, k, v):
        return tf.matmul(tf.nn.softmax(self.scores(q, k), axis=-1), v)

    def call(self, X):
        # in float32 at least: a 16-bit score ~30 is off by a tenth, which softmax makes a 10% error in the weights
        work = tf.float32 if X.dtype in (tf.float16, tf.bfloat16) else X.dtype
        Xw = tf.cast(X, work)
        q, k, v = (self.split(tf.matmul(Xw, tf.cast(w, work))) for w in (self.wq, self.wk, self.wv))
        return tf.cast(tf.matmul(self.merge(self.attend(q, k, v)), tf.cast(self.wo, work)), X.dtype)

    def get_config(self):
        return {**super().get_config(), "d": self.d, "heads": self.heads, "max_len": self.max_len}


IMPL = CausalAttention
