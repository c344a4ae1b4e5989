import tensorflow as tf


@tf.custom_gradient
def scaled(k, x):
    def grad(g):
        return None, k * g  # k is a setting, not data: no gradient
    return k * x, grad


IMPL = scaled
