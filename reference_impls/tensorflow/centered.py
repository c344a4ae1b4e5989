import tensorflow as tf


class CenteredLayer(tf.keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)  # name, dtype, trainable: what from_config passes back

    def call(self, X):
        return X - tf.reduce_mean(X)


IMPL = CenteredLayer
