"""Broken Keras rotary position embeddings (the rotary contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
import tensorflow as tf

from layer_conformance.reference_impls.tensorflow.rotary import Rotary as _Rotary
from tests.mutants.catalogue import Mutant

F, M = "tensorflow", "tests.mutants.tensorflow_rotary"


class RotaryFromOne(_Rotary):
    """Positions 1..seq instead of 0..seq-1 (off by one): the first position is rotated, not left alone."""
    def cos_sin(self, seq, dtype):
        cos, sin = super().cos_sin(seq + 1, dtype)
        return cos[1:], sin[1:]


def _pairs_interleaved(x):
    # (-x1, x0, -x3, x2, ...): feature 2i paired with 2i + 1
    return tf.reshape(tf.stack([-x[..., 1::2], x[..., 0::2]], axis=-1), tf.shape(x))


class RotaryInterleaved(_Rotary):
    """The paper's interleaved pairs (2i, 2i + 1), each at its own angle, where the contract pairs i with
    i + head_dim/2 (rotate_half)."""
    rotate_half = staticmethod(_pairs_interleaved)

    def cos_sin(self, seq, dtype):
        cos, sin = super().cos_sin(seq, dtype)
        h = self.head_dim // 2
        return tf.repeat(cos[:, :h], 2, axis=-1), tf.repeat(sin[:, :h], 2, axis=-1)


class RotaryTrainableInvFreq(_Rotary):
    """inv_freq held as a trainable weight: an optimizer would train the frequencies."""
    def __init__(self, head_dim, base=10000.0, **kwargs):
        super().__init__(head_dim, base, **kwargs)
        self.inv_freq = self.add_weight(name="inv_freq", shape=(head_dim // 2,), initializer="zeros")
        self.inv_freq.assign(1.0 / base ** (tf.range(0, head_dim, 2, dtype=tf.float32) / head_dim))

    def cos_sin(self, seq, dtype):
        angles = tf.range(seq, dtype=dtype)[:, None] * tf.cast(self.inv_freq, dtype)[None, :]
        angles = tf.concat([angles, angles], axis=-1)
        return tf.cos(angles), tf.sin(angles)


MUTANTS = [
    Mutant(F, "rotary", f"{M}:RotaryFromOne", "values", "case 'single_position': mismatched elements",
           blocked=("gradients",)),
    Mutant(F, "rotary", f"{M}:RotaryInterleaved", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant(F, "rotary", f"{M}:RotaryTrainableInvFreq", "parameters", "unexpected trainable state"),
]
