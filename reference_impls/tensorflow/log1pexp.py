import tensorflow as tf


@tf.custom_gradient
def log1pexp(x):
    def grad(upstream):
        # exp(x) / (1 + exp(x)) overflows to inf / inf; sigmoid is stable
        return upstream * tf.sigmoid(x)
    # max(x, 0) + log1p(exp(-|x|)): log(1 + exp(x)) without overflow for large x
    return tf.maximum(x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x))), grad


IMPL = log1pexp
