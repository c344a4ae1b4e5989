import tensorflow as tf


@tf.custom_gradient
def softmax_cross_entropy(logits, labels):
    log_p = tf.nn.log_softmax(logits, axis=-1)  # shifted by the max: stable at 1e4

    def grad(g):
        # p - y for one-hot rows; labels are data, not parameters: no gradient (None)
        p = tf.exp(log_p) * tf.reduce_sum(labels, axis=-1, keepdims=True)
        return g[..., None] * (p - labels), None
    return -tf.reduce_sum(labels * log_p, axis=-1), grad


IMPL = softmax_cross_entropy
