"""Third-party Keras code bound to the bundled contracts (see tests/zoo/bindings.yaml)."""
import keras


def keras_rmsnorm(eps):
    """keras.layers.RMSNormalization (argument name epsilon)."""
    return keras.layers.RMSNormalization(axis=-1, epsilon=eps)
