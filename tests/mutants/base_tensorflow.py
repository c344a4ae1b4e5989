"""The correct Keras 3 layers the TensorFlow mutants (tests/mutants/tensorflow_*.py) derive from, one per
contract, cut into the hooks a mistake lives in: a mutant overrides the one it gets wrong and states nothing
else. Not a catalogue module (no MUTANTS): its name does not start with the framework's.

The statistic is computed in the input's own dtype, as the mutants always did (the bundled reference upcasts
16-bit inputs): each mutant's numbers are those it had before it derived from here. Nothing here runs a
TensorFlow op at import time: the adapter configures devices first.
"""
import tensorflow as tf
from tensorflow import keras


class RMSNorm(keras.layers.Layer):
    """RMSNorm as Keras wants it: the width from build's input shape, the gain from add_weight in build."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * self.inverse_rms(X)

    def inverse_rms(self, X):
        """1 / sqrt(mean(X^2) + eps) over the last axis, one per row."""
        return tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + self.eps)


class RMSNormOfWidth(RMSNorm):
    """The same, told the contract's width d, as layers written from the chapter are (Keras would take it
    from build)."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(eps=eps, **kwargs)
        self.d = d


class CausalMask(keras.layers.Layer):
    """The mask precomputed once for the longest sequence, held as a non-trainable weight, sliced per call."""
    mask_trainable = False

    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)
        self.mask = self.add_weight(name="mask", shape=(max_len, max_len), dtype="bool",
                                    trainable=self.mask_trainable, initializer="zeros")
        self.mask.assign(self.masked(max_len))

    def masked(self, n):
        """Where a query (row) may not see a key (column): the keys after it."""
        return tf.range(n)[None, :] > tf.range(n)[:, None]

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(self.mask[:T, :T], float("-inf"), scores)


class Dropout(keras.layers.Layer):
    """Drops with probability p in training (Keras passes training= to a call that takes it), rescales the
    survivors by 1 / (1 - p), draws a fresh mask per call."""
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def call(self, X, training=None):
        return self.drop(X) if training else X

    def drop(self, X):
        return X * self.keep(X) / (1.0 - self.p)

    def keep(self, X):
        return tf.cast(tf.random.uniform(tf.shape(X)) >= self.p, X.dtype)
