"""Broken Keras layers under tf.function, each caught by the ``compiled`` check."""
import tensorflow as tf

from tests.mutants.base_tensorflow import RMSNormOfWidth
from tests.mutants.catalogue import Mutant


class RMSNormPythonBranch(RMSNormOfWidth):
    """Skips the normalization of already-small inputs, deciding in Python: ``bool(tensor)`` has a
    value eagerly, but none while tf.function traces."""
    def call(self, X):
        ms = tf.reduce_mean(X * X, axis=-1, keepdims=True)
        if bool(tf.reduce_max(ms) > 1e6):  # a Python bool computed from a tensor
            X = X / 1e3
        return self.gain * X * tf.math.rsqrt(ms + self.eps)


M = "tests.mutants.tensorflow_compiled"
MUTANTS = [
    Mutant("tensorflow", "rmsnorm", f"{M}:RMSNormPythonBranch", "compiled",
           "reads a tensor's value in Python", also=('composition', 'export', 'batching', 'abstract')),
]
