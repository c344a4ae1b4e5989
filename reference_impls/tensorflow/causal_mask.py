import tensorflow as tf


class CausalMask(tf.keras.layers.Layer):
    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        # Precompute once for the longest sequence; slice per call
        self.mask = self.add_weight(name="mask", shape=(max_len, max_len), dtype=tf.bool, trainable=False,
                                    initializer="zeros")
        self.mask.assign(tf.range(max_len)[None, :] > tf.range(max_len)[:, None])

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(self.mask[:T, :T], float("-inf"), scores)


IMPL = CausalMask
