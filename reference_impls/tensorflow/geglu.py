import math

import tensorflow as tf

from layer_conformance.reference_impls.tensorflow.swiglu import SwiGLU


def gelu(a):
    """The exact gelu, 0.5 a (1 + erf(a / sqrt(2))), with 1/sqrt(2) in a's dtype: tf.nn.gelu(approximate=False)
    holds it in float32, which leaves its float64 gradient 2.5e-7 off (keras.ops.gelu defaults to the tanh
    approximation)."""
    return 0.5 * a * (1.0 + tf.math.erf(a * tf.constant(1.0 / math.sqrt(2.0), a.dtype)))


class GeGLU(SwiGLU):
    gate = staticmethod(gelu)


IMPL = GeGLU
