"""Broken Keras 3 layers and tf.custom_gradient functions, one per known mistake.

Nothing here runs a TensorFlow op at import time: the adapter configures devices first.
"""
import functools

import tensorflow as tf
from tensorflow import keras

from layer_conformance.reference_impls.tensorflow.rmsnorm import RMSNorm as _ReferenceRMSNorm
from tests.mutants.catalogue import Mutant


def _rms(X, eps):
    return tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + eps)


class GainRawVariable(keras.layers.Layer):
    """The gain as a raw tf.Variable attribute: not among trainable_variables or get_weights()."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = tf.Variable(tf.ones([X_shape[-1]]))

    def call(self, X):
        return self.gain * X * _rms(X, self.eps)


class GainNotTrainable(keras.layers.Layer):
    """The gain from add_weight(trainable=False): registered, saved and moved, but never trained."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=(X_shape[-1],), initializer="ones", trainable=False)

    def call(self, X):
        return self.gain * X * _rms(X, self.eps)


class GainInList(keras.layers.Layer):
    """Raw tf.Variables in a list: Keras tracks lists, but only its own Variables inside them."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gains = [tf.Variable(tf.ones([X_shape[-1]]))]

    def call(self, X):
        return self.gains[0] * X * _rms(X, self.eps)


class GainInCall(keras.layers.Layer):
    """add_weight in call instead of build: Keras locks a layer's state once it is built."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def call(self, X):
        if not hasattr(self, "gain"):
            self.gain = self.add_weight(name="gain", shape=[X.shape[-1]], initializer="ones")
        return self.gain * X * _rms(X, self.eps)


class GainPinnedToCPU0(keras.layers.Layer):
    """The gain created under an explicit CPU:0 scope: it stays there whatever device the layer is built on."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        with tf.device("CPU:0"):
            self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * _rms(X, self.eps)


class EpsOutsideSqrt(keras.layers.Layer):
    """x / (sqrt(mean x^2) + eps): right for large rows, wrong where mean square ~ eps."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X / (tf.sqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True)) + self.eps)


class WrongAxis(keras.layers.Layer):
    """Normalizes over the batch axis instead of the feature axis."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=0, keepdims=True) + self.eps)


def _triu(max_len):
    return tf.range(max_len)[None, :] > tf.range(max_len)[:, None]


class MaskTrainable(keras.layers.Layer):
    """The mask from add_weight(trainable=True) (the default): an optimizer would be handed it."""
    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)
        self.mask = self.add_weight(name="mask", shape=(max_len, max_len), dtype="bool", initializer="zeros")
        self.mask.assign(_triu(max_len))

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(self.mask[:T, :T], float("-inf"), scores)


class MaskPlainTensor(keras.layers.Layer):
    """The mask as a plain tensor attribute: get_weights() omits it."""
    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)
        self.mask = _triu(max_len)

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(self.mask[:T, :T], float("-inf"), scores)


class MaskEveryCall(keras.layers.Layer):
    """The mask built afresh at every call: right values, but no state where the contract declares one."""
    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(_triu(T), float("-inf"), scores)


def round_ste_undecorated(X):
    """The @tf.custom_gradient decorator forgotten: tf.round has no gradient, so the tape gives None."""
    return tf.round(X)


@functools.cache
def _step():
    # created on first use, not at import (see the module docstring)
    return tf.Variable(1.0, name="step")


@tf.custom_gradient
def ste_reads_variable(X):
    """A quantizer step held in a tf.Variable, read inside the function, while grad takes no `variables`."""
    def grad(upstream):
        return upstream
    return tf.round(X / _step()) * _step(), grad


@tf.custom_gradient
def ste_doubled(X):
    """A wrong surrogate: the gradient doubled."""
    def grad(upstream):
        return 2 * upstream
    return tf.round(X), grad


class DeviceDependent(keras.layers.Layer):
    """Computes differently where its weight lives (a device-specific kernel with a bug)."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        skew = 1.001 if self.gain.value.device.endswith("CPU:1") else 1.0
        return self.gain * X * _rms(X, self.eps) * skew


class SetWeightsWhatFits(keras.layers.Layer):
    """A set_weights override that loads what fits and ignores the rest: a weight list of the
    wrong length loads silently (the gain may stay at its initial ones)."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * _rms(X, self.eps)

    def set_weights(self, weights):
        for variable, value in zip(self.weights, weights):
            variable.assign(value)


class BatchMeanSquare(keras.layers.Layer):
    """RMSNorm with reduce_mean left without its axis: one mean square over the whole batch, a batch
    statistic that mixes every example into every other's output."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * tf.math.rsqrt(tf.reduce_mean(X ** 2) + self.eps)


class WrongOutputShape(keras.layers.Layer):
    """RMSNorm whose compute_output_shape says one value per row (the mean square's shape, [batch, 1]) where the
    call returns the input's shape: right eagerly, wrong wherever Keras asks for the shape without data (a
    functional model, a symbolic call)."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        return self.gain * X * tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True) + self.eps)

    def compute_output_shape(self, X_shape):
        return (*X_shape[:-1], 1)


class TracedMemo(keras.layers.Layer):
    """RMSNorm that memoizes its inverse RMS by input shape in a Python dict whenever it is traced (a 'graph
    cache'): eager calls recompute; a later trace of the same shape reuses a tensor of an earlier graph."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps
        self._memo = {}

    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=[X_shape[-1]], initializer="ones")

    def call(self, X):
        if tf.executing_eagerly():
            return self.gain * X * _rms(X, self.eps)
        key = tuple(X.shape)
        if key not in self._memo:
            self._memo[key] = _rms(X, self.eps)
        return self.gain * X * self._memo[key]


class GainAddedInCall(keras.layers.Layer):
    """Creates its gain on the first call, in call() instead of build(): a layer built from build() alone
    (Model.build, summary(), a saved model being loaded) has no weights. Keras 3 refuses new state on a built
    layer, so it unlocks its tracker to get past that."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps
        self.gain = None

    def build(self, X_shape):
        pass

    def call(self, X):
        if self.gain is None:
            self._tracker.unlock()
            self.gain = self.add_weight(name="gain", shape=[X.shape[-1]], initializer="ones")
            self._tracker.lock()
        return self.gain * X * _rms(X, self.eps)


class OutputShapeFromGain(_ReferenceRMSNorm):
    """RMSNorm whose compute_output_shape reads the gain's shape (a weight made in build) instead of the
    input_shape: right once the layer is built, but Keras asks for the shape before build (a functional model
    being laid out, a layer inside another's compute_output_shape), where it raises AttributeError."""
    def compute_output_shape(self, X_shape):
        return (*X_shape[:-1], self.gain.shape[0])


M = "tests.mutants.tensorflow_mutants"
MUTANTS = [
    Mutant("tensorflow", "rmsnorm", f"{M}:DeviceDependent", "device_parity", "output on CPU:1 vs cpu", also=('devices',)),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainRawVariable", "parameters", "untracked attribute 'gain'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization')),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainRawVariable", "parameters", "self.add_weight(...) in build()", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization')),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainNotTrainable", "parameters",
           "it is created with add_weight(trainable=False)", blocked=('gradients',)),
    Mutant("tensorflow", "causal_mask", f"{M}:MaskEveryCall", "buffers",
           "non-trainable slot 'mask' is missing from the layer's state", blocked=('compiled', 'export', 'serialization')),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainInList", "parameters", "untracked attribute 'gains[0]'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization')),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainInCall", "parameters",
           "All state must be created in the `__init__()` method or in the `build()` method", blocked=('batching', 'compiled', 'composition', 'device_parity', 'devices', 'export', 'gradients', 'native', 'properties', 'serialization', 'strict_loading', 'values', 'construction', 'abstract')),
    Mutant("tensorflow", "rmsnorm", f"{M}:EpsOutsideSqrt", "values", "case 'edge_rows'", blocked=('gradients', 'native', 'properties', 'compiled')),
    Mutant("tensorflow", "rmsnorm", f"{M}:WrongAxis", "batching", "was perturbed", blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("tensorflow", "causal_mask", f"{M}:MaskTrainable", "buffers", "is registered as trainable", blocked=('parameters',)),
    Mutant("tensorflow", "causal_mask", f"{M}:MaskTrainable", "buffers", "add_weight(..., trainable=False)", blocked=('parameters',)),
    Mutant("tensorflow", "causal_mask", f"{M}:MaskPlainTensor", "buffers", "held as a plain attribute 'mask'", blocked=('compiled', 'devices', 'export', 'serialization')),
    Mutant("tensorflow", "round_ste", f"{M}:round_ste_undecorated", "gradients", "no gradient reached 'w'"),
    Mutant("tensorflow", "round_ste", f"{M}:ste_reads_variable", "values",
           "TypeError: @tf.custom_gradient grad_fn must accept keyword argument 'variables'", also=('batching', 'compiled', 'devices', 'export', 'abstract'), blocked=('device_parity', 'gradients')),
    Mutant("tensorflow", "round_ste", f"{M}:ste_doubled", "gradients", "2x the expected"),
    Mutant("tensorflow", "rmsnorm", f"{M}:BatchMeanSquare", "batching", "changed when example 0 was perturbed",
           blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("tensorflow", "rmsnorm", f"{M}:TracedMemo", "batching", "keeps state between calls",
           also=('composition', 'export')),
    Mutant("tensorflow", "rmsnorm", f"{M}:WrongOutputShape", "abstract", "compute_output_shape gives an output of shape",
           also=('composition',)),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainPinnedToCPU0", "devices", "'gain' on CPU:0"),
    Mutant("tensorflow", "rmsnorm", f"{M}:SetWeightsWhatFits", "strict_loading",
           "a saved state without slot 'gain' loaded strictly without an error: the layer's load ignores missing keys"),
    Mutant("tensorflow", "rmsnorm", f"{M}:GainAddedInCall", "construction",
           "build() alone made 0 trainable and 0 non-trainable weight(s) (none), the first call 1 and 0",
           # a .keras file is loaded by build() then the weights: the built layer has none to load them into
           also=('export',)),
    Mutant("tensorflow", "rmsnorm", f"{M}:OutputShapeFromGain", "construction",
           "compute_output_shape((16, 8)) on an unbuilt layer raised AttributeError: 'OutputShapeFromGain' object "
           "has no attribute 'gain'"),
    Mutant("tensorflow", "rmsnorm", f"{M}:OutputShapeFromGain", "construction",
           "compute the shape from input_shape and the constructor's arguments, not from weights"),
]
