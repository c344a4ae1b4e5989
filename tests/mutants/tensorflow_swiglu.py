"""swiglu's Keras mutants: the bundled SwiGLU layer (weights [in, out] from add_weight) with one mistake each."""
import tensorflow as tf

from layer_conformance.reference_impls.tensorflow.swiglu import SwiGLU
from tests.mutants.catalogue import Mutant

M = "tests.mutants.tensorflow_swiglu"


class SwiGLUGelu(SwiGLU):
    """GeGLU where SwiGLU is asked for: the exact gelu gates the w1 branch instead of silu."""
    def call(self, X):
        return tf.matmul(tf.nn.gelu(tf.matmul(X, self.w1), approximate=False) * tf.matmul(X, self.w3), self.w2)


class SwiGLUGateOnUp(SwiGLU):
    """The gate and the up projection swapped: silu on x @ w3, x @ w1 linear."""
    def call(self, X):
        return tf.matmul(tf.matmul(X, self.w1) * tf.nn.silu(tf.matmul(X, self.w3)), self.w2)


class SwiGLUUpRawVariable(SwiGLU):
    """w3 a raw tf.Variable attribute: not among trainable_variables or get_weights()."""
    def build(self, X_shape):
        normal = tf.keras.initializers.RandomNormal
        self.w1 = self.add_weight(name="w1", shape=[self.d, self.hidden], initializer=normal(stddev=self.d ** -0.5))
        self.w3 = tf.Variable(tf.random.normal([self.d, self.hidden], stddev=self.d ** -0.5))
        self.w2 = self.add_weight(name="w2", shape=[self.hidden, self.d],
                                  initializer=normal(stddev=self.hidden ** -0.5))


MUTANTS = [
    Mutant("tensorflow", "swiglu", f"{M}:SwiGLUGelu", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("tensorflow", "swiglu", f"{M}:SwiGLUGateOnUp", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("tensorflow", "swiglu", f"{M}:SwiGLUUpRawVariable", "parameters", "untracked attribute 'w3'",
           blocked=("compiled", "composition", "device_parity", "devices", "export", "gradients", "serialization",
                    "values")),
]


# --- geglu -----------------------------------------------------------------------------------

class GeGLUKerasDefault(SwiGLU):
    """keras.ops.gelu at its default, approximate=True: the tanh approximation, not the exact gelu asked for."""
    def call(self, X):
        import keras
        return tf.matmul(keras.ops.gelu(tf.matmul(X, self.w1)) * tf.matmul(X, self.w3), self.w2)


MUTANTS += [
    Mutant("tensorflow", "geglu", f"{M}:GeGLUKerasDefault", "values", "mismatched elements", blocked=("gradients",)),
]
