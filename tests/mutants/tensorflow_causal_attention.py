"""Broken Keras causal self-attention (the causal_attention contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
import math

import tensorflow as tf

from layer_conformance.reference_impls.tensorflow.causal_attention import CausalAttention as _CausalAttention
from tests.mutants.catalogue import Mutant

M = "tests.mutants.tensorflow_causal_attention"


class AttentionNoMask(_CausalAttention):
    """No causal mask: every query sees the whole sequence, the future included."""
    def scores(self, q, k):
        return tf.matmul(q, k, transpose_b=True) / math.sqrt(self.d // self.heads)


class AttentionSoftmaxOverQueries(_CausalAttention):
    """Softmax over the queries (axis -2) instead of the keys."""
    def attend(self, q, k, v):
        return tf.matmul(tf.nn.softmax(self.scores(q, k), axis=-2), v)


class AttentionMaskTrainable(_CausalAttention):
    """The mask from add_weight(trainable=True) (the default): an optimizer would be handed it."""
    def build(self, X_shape):
        super().build(X_shape)
        n = self.max_len
        self._tracker.untrack(self.mask)
        self.mask = self.add_weight(name="mask", shape=(n, n), dtype=tf.bool, trainable=True, initializer="zeros")
        self.mask.assign(tf.range(n)[None, :] > tf.range(n)[:, None])


MUTANTS = [
    Mutant("tensorflow", "causal_attention", f"{M}:AttentionNoMask", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
    Mutant("tensorflow", "causal_attention", f"{M}:AttentionSoftmaxOverQueries", "values",
           "case 'random': mismatched elements", blocked=("gradients", "native")),
    Mutant("tensorflow", "causal_attention", f"{M}:AttentionMaskTrainable", "buffers", "is registered as trainable",
           blocked=("parameters",)),
]
