import tensorflow as tf


@tf.custom_gradient
def linear(W, x, b):
    def grad(g):
        # never the Jacobian: an outer product and a transposed product
        return tf.tensordot(g, x, axes=0), tf.linalg.matvec(W, g, transpose_a=True), g
    return tf.linalg.matvec(W, x) + b, grad


IMPL = linear
