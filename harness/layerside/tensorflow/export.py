"""TensorFlow (Keras 3): whole-layer formats (the ``export`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect
import os

import numpy as np
import keras
import tensorflow as tf

from ...protocol import NotApplicable
from ...protocol.core import import_spec
from ...protocol.export import ExportNotes, ExportProtocol


class TensorFlowExport(ExportProtocol):
    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["keras", "savedmodel"] if isinstance(obj, keras.layers.Layer) else ["savedmodel"]

    def export_save(self, obj, fmt, examples, path):
        os.makedirs(path, exist_ok=True)
        if fmt == "keras":
            # the .keras file holds get_config() (rebuilt through from_config) and the weights
            keras.saving.save_model(obj, os.path.join(path, "layer.keras"))
            return ExportNotes(gradients="kept")
        if fmt == "savedmodel":
            module = _Serving(obj)
            functions = [module.__call__.get_concrete_function(*[tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype))
                                                                  for a in xs]) for xs in examples]
            custom = any("_gradient_op_type" in op.node_def.attr for f in functions for op in f.graph.get_operations())
            tf.saved_model.save(module, os.path.join(path, "savedmodel"),
                                options=tf.saved_model.SaveOptions(experimental_custom_gradients=True))
            # The SavedModel holds the traced graph, and TensorFlow's graph optimizer may fuse or reorder
            # float ops that eager Keras runs one by one: values are bit-equal to the same graph run in
            # this process (a handle the check calls), not necessarily to eager execution.
            without_option = None
            if custom:
                # what TensorFlow does with the custom gradient when the option is left out
                try:
                    tf.saved_model.save(module, os.path.join(path, "savedmodel_plain"),
                                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
                    without_option = "saved"
                except Exception as exc:
                    without_option = f"saving failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return ExportNotes(gradients="kept", runs_as=module, without_option=without_option,
                               runs_as_what="the traced tf.function the SavedModel holds, run in the original process")
        raise NotApplicable(f"{fmt} is not a TensorFlow/Keras format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        if fmt == "keras":
            impl = import_spec(impl_spec)  # registers its serializables, as a deployment's import does
            custom = {impl.__name__: impl} if inspect.isclass(impl) else {}
            layer = keras.saving.load_model(os.path.join(path, "layer.keras"), custom_objects=custom)
            return layer, layer
        if fmt in ("savedmodel", "savedmodel_plain"):
            # TensorFlow alone: a SavedModel is a graph and needs no Python class
            loaded = tf.saved_model.load(os.path.join(path, fmt))
            return _Loaded(loaded), None
        raise NotApplicable(f"{fmt} is not a TensorFlow/Keras format", code="no_format")


class _Serving(tf.Module):
    """The layer or function as a SavedModel's traced signature (inference mode)."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    @tf.function
    def __call__(self, *xs):
        if isinstance(self.obj, keras.layers.Layer):
            return self.obj(*xs, training=False)
        return self.obj(*xs)


class _Loaded:
    """A loaded SavedModel, called like the original (its restored function dispatches on the signature)."""

    def __init__(self, loaded):
        self.loaded = loaded

    def __call__(self, *xs):
        return self.loaded(*xs)
