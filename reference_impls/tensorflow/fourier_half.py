import tensorflow as tf


class FourierHalf(tf.keras.layers.Layer):
    """The leading half (n // 2) of the Fourier coefficients along the last axis."""

    def call(self, X):
        n = X.shape[-1]
        # tf.signal.fft transforms the last axis of a complex tensor: complex64 for float32
        return tf.signal.fft(tf.cast(X, tf.complex64))[..., : n // 2]


IMPL = FourierHalf
