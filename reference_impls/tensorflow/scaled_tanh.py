import tensorflow as tf


@tf.custom_gradient
def scaled_tanh(x):
    y = tf.tanh(x)

    def grad(upstream):
        return upstream * (1 - tf.square(y)) * 0.5  # the true gradient, scaled by 0.5
    return y, grad


IMPL = scaled_tanh
