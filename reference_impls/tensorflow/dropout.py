import tensorflow as tf


class Dropout(tf.keras.layers.Layer):
    def __init__(self, p=0.5, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back
        self.p = p

    def call(self, X, training=None):
        # Keras passes the enclosing model's training= to every layer whose call accepts it
        if not training or self.p == 0:
            return X
        keep = tf.cast(tf.random.uniform(tf.shape(X)) >= self.p, X.dtype)
        return X * keep / (1.0 - self.p)


IMPL = Dropout
