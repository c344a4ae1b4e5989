"""The TensorFlow adapter's own promises, beyond what the mutant catalogue exercises.

No TensorFlow op runs at import: every test asks for the adapter first, which configures
the second logical CPU before TF's runtime starts.
"""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = tf.keras

from layer_conformance import layerside  # noqa: E402
from layer_conformance.reference_impls.tensorflow.rmsnorm import RMSNorm  # noqa: E402


@pytest.fixture
def adapter():
    return layerside.get_adapter("tensorflow")


@tf.custom_gradient
def user_ste(x):
    def grad(upstream):
        return upstream
    return tf.round(x), grad


class KwargsNorm(keras.layers.Layer):
    """The Keras idiom: extra keyword arguments go to Layer.__init__."""
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, shape):
        self.gain = self.add_weight(name="gain", shape=[shape[-1]], initializer="ones")
        self.table = {"a": tf.zeros([3])}  # a plain tensor in a dict: Keras does not track it

    def call(self, X):
        return self.gain * X


def _built(adapter, layer, shape=(4, 8)):
    return adapter.build(layer, [np.ones(shape, dtype=np.float32)])


def test_detects_custom_gradient_functions_and_keras_layers(adapter):
    assert layerside.detect(user_ste) == "tensorflow"
    assert adapter.owns(RMSNorm) and adapter.owns(RMSNorm())
    assert not adapter.owns(np.sum) and not adapter.owns(lambda x: x)


def test_names_are_relative_to_the_layer_and_seed_state_is_left_out(adapter):
    norm = _built(adapter, RMSNorm())
    assert list(adapter.trainable(norm)) == ["gain"]
    inner = RMSNorm()
    adapter.call(keras.Sequential([inner]), [np.ones((2, 8), np.float32)])
    assert list(adapter.trainable(inner)) == ["gain"]
    dropout = _built(adapter, keras.layers.Dropout(0.5, seed=1))
    assert dropout.non_trainable_variables and adapter.non_trainable(dropout) == {}


def test_constructor_arguments_keras_rejects_are_left_out(adapter):
    layer = adapter.construct(KwargsNorm, {"d": 8, "eps": 1e-3, "name": "norm"})
    assert layer.eps == 1e-3 and layer.name == "norm"


def test_untracked_finds_a_tensor_in_a_plain_dict_only(adapter):
    layer = _built(adapter, KwargsNorm())
    assert adapter.untracked(layer) == {"table['a']": "tensor [3]"}


def test_round_trip_is_strict(adapter):
    src = _built(adapter, RMSNorm())
    adapter.assign(src, "gain", np.linspace(0.5, 1.5, 8))
    fresh = adapter.round_trip(src, _built(adapter, RMSNorm()))
    np.testing.assert_array_equal(adapter.serialized_state(fresh)["gain"], np.linspace(0.5, 1.5, 8, dtype=np.float32))
    with pytest.raises(ValueError):
        adapter.round_trip(src, _built(adapter, RMSNorm(), shape=(4, 5)))
    with pytest.raises(ValueError):
        adapter.round_trip(src, _built(adapter, keras.layers.Dense(8)))


def test_devices_are_inspected_where_state_and_outputs_live(adapter):
    assert adapter.devices()[0] == "CPU:1"
    moved = adapter.move(None, "CPU:1", rebuild=lambda: _built(adapter, RMSNorm()))
    assert adapter.device_of(moved.gain) == "CPU:1"
    assert adapter.device_of(adapter.call(moved, [np.ones((2, 8), np.float32)], device="CPU:1")) == "CPU:1"
    assert adapter.device_of(_built(adapter, RMSNorm()).gain) == adapter.cpu_device


def test_vjp_reports_a_missing_gradient_as_none(adapter):
    w = np.array([0.9, 1.4, 2.6], np.float32)
    grads = adapter.vjp(tf.round, None, [w], [0], np.ones(3)).inputs
    assert grads == (None,)
    grads = adapter.vjp(user_ste, None, [w], [0], np.array([1.0, 2.0, 3.0])).inputs
    np.testing.assert_array_equal(adapter.numpy(grads[0]), [1.0, 2.0, 3.0])


def test_float64_twin_of_a_layer_sized_at_build(adapter):
    layer = _built(adapter, RMSNorm())
    adapter.assign(layer, "gain", np.linspace(0.5, 1.5, 8))
    twin = adapter.to_float64(layer)
    assert adapter.dtype_name(twin.gain) == "float64"
    np.testing.assert_array_equal(adapter.numpy(twin.gain), adapter.numpy(layer.gain))
    assert adapter.dtype_name(adapter.call(twin, [np.ones((2, 8))])) == "float64"
    assert keras.config.dtype_policy().name == "float32"  # the global policy is put back


def test_forward_mode_and_checkpoint_loading(adapter):
    w, t = np.array([0.9, 1.4, 2.6], np.float32), np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(adapter.numpy(adapter.jvp(user_ste, None, [w], [t]).tangent), t)
    np.testing.assert_array_equal(adapter.numpy(adapter.jvp(tf.round, None, [w], [t]).tangent), np.zeros(3))
    saved = adapter.export_state(_built(adapter, RMSNorm()))
    adapter.load_state(_built(adapter, RMSNorm()), saved, strict=True)
    with pytest.raises(ValueError):
        adapter.load_state(_built(adapter, RMSNorm(), shape=(4, 5)), saved, strict=True)
