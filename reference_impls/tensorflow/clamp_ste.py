import tensorflow as tf


@tf.custom_gradient
def clamp_ste(X, lo, hi):
    def grad(upstream):
        # strictly inside only (the closure captures X); lo and hi get no gradient
        inside = tf.logical_and(X > lo, X < hi)
        return upstream * tf.cast(inside, upstream.dtype), None, None
    return tf.clip_by_value(X, lo, hi), grad


IMPL = clamp_ste
