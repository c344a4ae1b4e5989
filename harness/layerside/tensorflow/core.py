"""TensorFlow / Keras 3: building, calling and holding a layer (detection, tensors, construction, state, containers,
devices, the process's global state), and the helpers the other areas of this folder share.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import contextlib
import inspect
import weakref

import numpy as np
import keras
import tensorflow as tf

from ...protocol.core import CoreProtocol
from ..common import walk_attributes


class _KerasInternals:
    """Keras's own bookkeeping attributes (registered state lives in them), plus TF's ``_self_*`` tracking."""
    names = frozenset(vars(keras.layers.Layer()))

    def __contains__(self, name):
        return name in self.names or name.startswith("_self_")


def _top_module(name) -> str:
    return (name or "").split(".")[0]


class TensorFlowCore(CoreProtocol):
    name = "tensorflow"
    module = "tensorflow"
    immutable_arrays = "TensorFlow tensors are immutable: a layer cannot change its input"
    cpu_device = "CPU:0"
    gpu_device = "GPU:0"

    def owns(self, obj) -> bool:
        if inspect.isclass(obj):
            return issubclass(obj, (keras.layers.Layer, tf.Module))
        if isinstance(obj, (keras.layers.Layer, keras.Variable, tf.Tensor, tf.Variable, tf.Module)):
            return True
        # @tf.custom_gradient returns a TF object (custom_gradient.Bind) that carries TF's decorator
        # record; its __module__ is the user's, so look at the wrapper itself.
        if getattr(obj, "_tf_decorator", None) is not None:
            return True
        return any(_top_module(m) in ("tensorflow", "keras")
                   for m in (type(obj).__module__, getattr(obj, "__module__", "")))

    def configure_early(self):
        # A second logical CPU gives the devices check somewhere to move to; TF allows this only
        # before its runtime starts, which a user module running ops at import time prevents.
        cpus = tf.config.list_physical_devices("CPU")
        try:
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
        except RuntimeError:
            pass

    def devices(self):
        cpus = [self._short(d.name) for d in tf.config.list_logical_devices("CPU")]
        return cpus[1:2] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])

    @staticmethod
    def _short(device: str) -> str:
        spec = tf.DeviceSpec.from_string(device)
        return f"{spec.device_type}:{spec.device_index or 0}" if spec.device_type else device

    # -- tensors -----------------------------------------------------------------------
    def tensor(self, array, device=None):
        with tf.device(device) if device else contextlib.nullcontext():
            return tf.constant(np.asarray(array))

    def numpy(self, t):
        if not self.is_tensor(t):
            raise TypeError(f"expected a TensorFlow tensor, got {type(t).__name__}")
        return np.asarray(t.numpy())

    def is_tensor(self, obj):
        return isinstance(obj, (tf.Tensor, tf.Variable, keras.Variable))

    def dtype_name(self, t):
        return keras.backend.standardize_dtype(t.dtype)

    def device_of(self, t):
        # a Keras variable's placement is that of the tf.Variable it wraps
        return self._short((t.value if isinstance(t, keras.Variable) else t).device)

    # -- building and calling ----------------------------------------------------------------
    def call(self, layer, inputs, device=None, training=False, kwargs=None):
        with tf.device(device) if device else contextlib.nullcontext():
            args = [a if self.is_tensor(a) else tf.constant(np.asarray(a)) for a in inputs]
            if isinstance(layer, keras.layers.Layer):
                return layer(*args, training=training, **(kwargs or {}))
            return layer(*args, **(kwargs or {}))

    def construct(self, factory, kwargs):
        # The Keras idiom __init__(self, ..., **kwargs) forwards to Layer.__init__, which rejects
        # arguments it does not know: pass only those named by the class or by Layer.__init__.
        if inspect.isclass(factory) and issubclass(factory, keras.layers.Layer):
            named = set()
            for f in (factory.__init__, keras.layers.Layer.__init__):
                named |= {p.name for p in inspect.signature(f).parameters.values()
                          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
            kwargs = {k: v for k, v in kwargs.items() if k in named}
        layer = super().construct(factory, kwargs)
        if isinstance(layer, keras.layers.Layer):
            _MADE[layer] = (factory, kwargs)  # to_dtype makes its twin the same way: no get_config needed
        return layer

    # -- state ---------------------------------------------------------------------------
    def _named(self, layer) -> dict:
        """Every weight (SeedGenerator state excluded) by its path below the layer's own path."""
        if not isinstance(layer, keras.layers.Layer):
            return {}
        # a variable created in __init__ keeps the path it had before the layer joined a container
        roots = [f"{r}/" for r in (layer.path, layer.name) if r]
        out = {}
        for v in layer.weights:
            root = next((r for r in roots if v.path.startswith(r)), "")
            name = v.path[len(root):]
            key, i = name, 1
            while key in out:
                key, i = f"{name}:{i}", i + 1
            out[key] = v
        return out

    def trainable(self, layer):
        ids = {id(v) for v in getattr(layer, "trainable_variables", [])}
        return {k: v for k, v in self._named(layer).items() if id(v) in ids}

    def non_trainable(self, layer):
        ids = {id(v) for v in getattr(layer, "trainable_variables", [])}
        return {k: v for k, v in self._named(layer).items() if id(v) not in ids}

    def optimizer_view(self, layer):
        return list(layer.trainable_variables)

    def untracked(self, layer):
        known = list(layer.variables)  # SeedGenerator state included: Keras tracks it
        registered = {id(v) for v in known} | {id(v.value) for v in known}

        def is_state(v):
            return isinstance(v, (tf.Variable, tf.Tensor, keras.Variable)) and id(v) not in registered

        def describe(v):
            kind = "tf.Variable" if isinstance(v, tf.Variable) else "keras.Variable" \
                if isinstance(v, keras.Variable) else "tensor"
            return f"{kind} {list(v.shape)}"

        def children(v):
            # sub-layers are reached through the attributes that hold them, under their attribute names
            return [] if isinstance(v, keras.layers.Layer) else None

        return walk_attributes(layer, is_state, children, describe, internal=_KerasInternals())

    def assign(self, layer, name, value):
        var = self._named(layer)[name]
        var.assign(np.asarray(value).astype(var.dtype))

    def serialized_state(self, layer):
        return dict(zip(self._named(layer), layer.get_weights()))

    def round_trip(self, layer, fresh):
        # set_weights is positional and raises on a count or shape mismatch
        fresh.set_weights(layer.get_weights())
        return fresh

    def export_state(self, layer):
        return layer.get_weights()

    def load_state(self, layer, saved, strict=True):
        if not strict:
            raise NotImplementedError("Keras's set_weights has no non-strict form")
        layer.set_weights(saved)
        return layer

    def alter_saved(self, layer, saved, drop=None, add=None):
        saved = list(saved)  # positional, in layer.weights order
        if drop is not None:
            var = self._named(layer)[drop]
            del saved[[id(w) for w in layer.weights].index(id(var))]
        if add is not None:
            saved.append(np.zeros(1, dtype=np.float32))
        return saved

    # -- composition and devices ---------------------------------------------------------------
    @staticmethod
    def _dense(units):
        init = keras.initializers.RandomNormal(stddev=0.3, seed=0)
        return keras.layers.Dense(units, kernel_initializer=init, bias_initializer=init)

    def sequential(self, layer, width):
        return keras.Sequential([self._dense(width), layer, self._dense(2)])

    def nest(self, layer, dense=None):
        # Keras's mode switch is the training= argument of the container's call (see call()). The
        # container takes the layer's dtype policy: under the global one its deferred input would
        # cast a float64 input to float32 on the way in
        policy = getattr(layer, "dtype_policy", None)
        previous = keras.config.dtype_policy()
        if policy is not None:
            keras.config.set_dtype_policy(policy)
        try:
            return keras.Sequential(([self._dense(dense[1])] if dense else []) + [layer])
        finally:
            keras.config.set_dtype_policy(previous)

    def manual_seed(self, seed):
        # Keras 3's initializers draw their seeds from Python's generator and its own global SeedGenerator, which
        # tf.random.set_seed alone leaves as they were: keras.utils.set_random_seed sets them all, numpy's global
        # generator too, which is put back (a check leaves it as it found it)
        saved = np.random.get_state()
        keras.utils.set_random_seed(seed)
        np.random.set_state(saved)

    def move(self, layer, device, rebuild=None):
        # Keras has no move call: placement is settled when variables are created
        if rebuild is None:
            raise NotImplementedError("a Keras layer is placed when built; moving needs rebuild()")
        with tf.device(device):
            return rebuild()

    def save_globals(self):
        return {"dtype policy": keras.config.dtype_policy().name, "floatx": keras.config.floatx(),
                "eager functions": tf.config.functions_run_eagerly()}

    def restore_globals(self, saved):
        now = self.save_globals()
        keras.config.set_floatx(saved["floatx"])
        keras.config.set_dtype_policy(saved["dtype policy"])
        tf.config.run_functions_eagerly(saved["eager functions"])
        return [f"keras {k}" for k in saved if now[k] != saved[k]]


# each layer the harness constructed -> (factory, arguments): a twin in another dtype is made the same way
_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
