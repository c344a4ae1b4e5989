"""Broken Keras 3 layers and tf.custom_gradient functions, one per known mistake: each layer is a correct one of
tests/mutants/base_tensorflow.py with the method its mistake lives in overridden.

Nothing here runs a TensorFlow op at import time: the adapter configures devices first.
"""
import functools

import tensorflow as tf
from tensorflow import keras

from tests.mutants.base_tensorflow import CausalMask, RMSNorm
from tests.mutants.catalogue import Mutant


class GainRawVariable(RMSNorm):
    """The gain as a raw tf.Variable attribute: not among trainable_variables or get_weights()."""
    def build(self, X_shape):
        self.gain = tf.Variable(tf.ones([X_shape[-1]]))


class GainNotTrainable(RMSNorm):
    """The gain from add_weight(trainable=False): registered, saved and moved, but never trained."""
    def build(self, X_shape):
        self.gain = self.add_weight(name="gain", shape=(X_shape[-1],), initializer="ones", trainable=False)


class GainInList(RMSNorm):
    """Raw tf.Variables in a list: Keras tracks lists, but only its own Variables inside them."""
    def build(self, X_shape):
        self.gains = [tf.Variable(tf.ones([X_shape[-1]]))]

    def call(self, X):
        return self.gains[0] * X * self.inverse_rms(X)


class GainInCall(RMSNorm):
    """add_weight in call instead of build: Keras locks a layer's state once it is built."""
    build = keras.layers.Layer.build  # Keras' own, which makes nothing (and marks the layer built at once)

    def call(self, X):
        if not hasattr(self, "gain"):
            self.gain = self.add_weight(name="gain", shape=[X.shape[-1]], initializer="ones")
        return super().call(X)


class GainPinnedToCPU0(RMSNorm):
    """The gain created under an explicit CPU:0 scope: it stays there whatever device the layer is built on."""
    def build(self, X_shape):
        with tf.device("CPU:0"):
            super().build(X_shape)


class EpsOutsideSqrt(RMSNorm):
    """x / (sqrt(mean x^2) + eps): right for large rows, wrong where mean square ~ eps."""
    def call(self, X):
        return self.gain * X / (tf.sqrt(tf.reduce_mean(X ** 2, axis=-1, keepdims=True)) + self.eps)


class WrongAxis(RMSNorm):
    """Normalizes over the batch axis instead of the feature axis."""
    def inverse_rms(self, X):
        return tf.math.rsqrt(tf.reduce_mean(X ** 2, axis=0, keepdims=True) + self.eps)


class MaskTrainable(CausalMask):
    """The mask from add_weight(trainable=True) (the default): an optimizer would be handed it."""
    mask_trainable = True


class MaskPlainTensor(CausalMask):
    """The mask as a plain tensor attribute: get_weights() omits it."""
    def __init__(self, max_len, **kwargs):
        keras.layers.Layer.__init__(self, **kwargs)
        self.mask = self.masked(max_len)


class MaskEveryCall(CausalMask):
    """The mask built afresh at every call: right values, but no state where the contract declares one."""
    def __init__(self, max_len, **kwargs):
        keras.layers.Layer.__init__(self, **kwargs)

    def call(self, scores):
        T = scores.shape[-1]
        return tf.where(self.masked(T), float("-inf"), scores)


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


class DeviceDependent(RMSNorm):
    """Computes differently where its weight lives (a device-specific kernel with a bug)."""
    def call(self, X):
        skew = 1.001 if self.gain.value.device.endswith("CPU:1") else 1.0
        return super().call(X) * skew


class SetWeightsWhatFits(RMSNorm):
    """A set_weights override that loads what fits and ignores the rest: a weight list of the
    wrong length loads silently (the gain may stay at its initial ones)."""
    def set_weights(self, weights):
        for variable, value in zip(self.weights, weights):
            variable.assign(value)


class BatchMeanSquare(RMSNorm):
    """RMSNorm with reduce_mean left without its axis: one mean square over the whole batch, a batch
    statistic that mixes every example into every other's output."""
    def inverse_rms(self, X):
        return tf.math.rsqrt(tf.reduce_mean(X ** 2) + self.eps)


class WrongOutputShape(RMSNorm):
    """RMSNorm whose compute_output_shape says one value per row (the mean square's shape, [batch, 1]) where the
    call returns the input's shape: right eagerly, wrong wherever Keras asks for the shape without data (a
    functional model, a symbolic call)."""
    def compute_output_shape(self, X_shape):
        return (*X_shape[:-1], 1)


class TracedMemo(RMSNorm):
    """RMSNorm that memoizes its inverse RMS by input shape in a Python dict whenever it is traced (a 'graph
    cache'): eager calls recompute; a later trace of the same shape reuses a tensor of an earlier graph."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(eps, **kwargs)
        self._memo = {}

    def inverse_rms(self, X):
        if tf.executing_eagerly():
            return super().inverse_rms(X)
        key = tuple(X.shape)
        if key not in self._memo:
            self._memo[key] = super().inverse_rms(X)
        return self._memo[key]


class GainAddedInCall(RMSNorm):
    """Creates its gain on the first call, in call() instead of build(): a layer built from build() alone
    (Model.build, summary(), a saved model being loaded) has no weights. Keras 3 refuses new state on a built
    layer, so it unlocks its tracker to get past that."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(eps, **kwargs)
        self.gain = None

    def build(self, X_shape):
        pass

    def call(self, X):
        if self.gain is None:
            self._tracker.unlock()
            self.gain = self.add_weight(name="gain", shape=[X.shape[-1]], initializer="ones")
            self._tracker.lock()
        return super().call(X)


class OutputShapeFromGain(RMSNorm):
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
