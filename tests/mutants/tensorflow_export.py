"""Keras layers that run but do not come back from a .keras file (the export check)."""
import keras
import numpy as np

from layer_conformance.reference_impls.tensorflow.rmsnorm_bias import RMSNorm as _RMSNormBias
from tests.mutants.base_tensorflow import RMSNorm, RMSNormOfWidth
from tests.mutants.catalogue import Mutant


class NoKwargs(RMSNorm):
    """__init__ without **kwargs: from_config passes name, dtype and trainable back and it refuses them."""
    def __init__(self, eps=1e-6):
        super().__init__(eps)


class ConfigWithoutArguments(RMSNormOfWidth):
    """get_config() overridden without the constructor's arguments: from_config cannot call __init__."""
    def get_config(self):
        return super().get_config()  # an override drops Keras's automatic config of d and eps


class NumpyNaNGuard(RMSNormOfWidth):
    """Refuses NaN inputs with a numpy test in call(): right eagerly, but tf.saved_model.save traces call()
    into a graph, where a tensor has no value to hand numpy."""
    def call(self, X):
        if np.isnan(X).any():
            raise ValueError("RMSNorm got NaN inputs")
        return super().call(X)


class ConfigWithoutEps(RMSNormOfWidth):
    """get_config() written out by hand, forgetting eps: from_config builds the layer with eps's default (1e-5,
    not the contract's)."""
    def __init__(self, d, eps=1e-5, **kwargs):
        super().__init__(d, eps, **kwargs)

    def get_config(self):
        return {**super().get_config(), "d": self.d}


class ConfigWithoutKeywordOnly(RMSNormOfWidth):
    """Keyword-only arguments and a get_config() that forgets d: from_config cannot call __init__."""
    def __init__(self, *, d, eps=1e-6, **kwargs):
        super().__init__(d, eps, **kwargs)

    def get_config(self):
        return {**super().get_config(), "eps": self.eps}


class ConfigWithoutBias(_RMSNormBias):
    """get_config() written out by hand, forgetting the flag that decides whether a bias weight exists: the
    layer rebuilt from it has one weight, the file holds two."""
    def get_config(self):
        return {**super().get_config(), "eps": self.eps}


class BuildChecksTuple(RMSNormOfWidth):
    """build() checks the input shape against a tuple: eagerly Keras passes a tuple, but a loaded layer is
    built from the shape saved in the file's JSON, a list, and refuses it."""
    def build(self, X_shape):
        if X_shape[-1:] != (self.d,):
            raise ValueError(f"{type(self).__name__} expects inputs of last dimension {self.d}, got {X_shape}")
        super().build(X_shape)


class RMSNormWithInitializer(RMSNormOfWidth):
    """Takes the gain's initializer as an argument and does not override get_config."""
    def __init__(self, d, eps=1e-6, gain_initializer="ones", **kwargs):
        super().__init__(d, eps, **kwargs)
        self.gain_initializer = gain_initializer

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[self.d], initializer=self.gain_initializer)


def rmsnorm_initializer_object(d, eps=1e-6):
    """A factory that hands the layer an initializer object, not a plain value: Keras writes no automatic
    get_config() for it, so the layer cannot be saved as .keras."""
    return RMSNormWithInitializer(d, eps, gain_initializer=keras.initializers.Ones())


MUTANTS = [
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:NoKwargs", "export",
           "__init__ must accept **kwargs"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:ConfigWithoutArguments", "export",
           "get_config() must return every constructor argument"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:NumpyNaNGuard", "export",
           "numpy calls inside call() do not trace", also=('compiled', 'batching', 'abstract')),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:ConfigWithoutEps", "export",
           "a constructor argument left out of get_config()"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:BuildChecksTuple", "export",
           "with the input shape saved in the file's JSON"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:ConfigWithoutKeywordOnly", "export",
           "under its own name"),
    Mutant("tensorflow", "rmsnorm", "tests.mutants.tensorflow_export:rmsnorm_initializer_object", "export",
           "Keras writes one automatically only when every argument is a plain value"),
    Mutant("tensorflow", "rmsnorm_bias", "tests.mutants.tensorflow_export:ConfigWithoutBias", "export",
           "every constructor argument that decides which weights exist"),
]
