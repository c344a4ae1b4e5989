"""TensorFlow (Keras 3): shapes without data (the ``abstract`` check) and a symbolic batch axis.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import numpy as np
import keras
import tensorflow as tf

from ...protocol.shapes import AbstractWay, ShapesProtocol, SymbolicBatch
from ..common import abstract_error


class TensorFlowShapes(ShapesProtocol):
    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        arrays = [np.asarray(a) for a in inputs]
        ways = []

        def said(way, run, dtype=True):
            try:
                out = run()
            except Exception as exc:
                return ways.append(AbstractWay(way=way, error=abstract_error(exc)))
            if isinstance(out, (list, tuple)) and len(out) == 1 and not dtype:
                out = out[0] if isinstance(out[0], (list, tuple)) else out
            shape = out if not dtype else getattr(out, "shape", None)
            if shape is None or (dtype and getattr(out, "dtype", None) is None):
                return ways.append(AbstractWay(way=way, error=f"a {type(out).__name__}, not a tensor's spec"))
            shape = list(shape)
            if any(d is None for d in shape):
                return ways.append(AbstractWay(way=way, error=f"a shape {shape} with an unknown dimension, though "
                                                              f"every input dimension is known"))
            ways.append(AbstractWay(way=way, shape=tuple(int(d) for d in shape),
                                    dtype=keras.backend.standardize_dtype(out.dtype) if dtype else None))

        if isinstance(layer, keras.layers.Layer):
            symbolic = [keras.KerasTensor(a.shape, dtype=keras.backend.standardize_dtype(a.dtype)) for a in arrays]
            said("a call on keras.KerasTensor inputs", lambda: layer(*symbolic, training=False))
            if type(layer).compute_output_shape is not keras.layers.Layer.compute_output_shape:
                said("compute_output_shape", lambda: layer.compute_output_shape(*[a.shape for a in arrays]),
                     dtype=False)
        else:
            specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in arrays]
            said("tf.function traced with TensorSpec inputs",
                 lambda: tf.function(lambda *xs: fn(*xs)).get_concrete_function(*specs).structured_outputs)
        return ways

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        first = [np.asarray(a) for a in batches[0]]
        signature = []
        for a, on in zip(first, batched):
            shape = list(a.shape)
            if on:
                shape[axis] = None
            signature.append(tf.TensorSpec(shape, tf.as_dtype(a.dtype)))
        program = tf.function(lambda *xs: self.call(fn, list(xs)), input_signature=signature)
        outs = [self.numpy(program(*[tf.constant(np.asarray(a)) for a in xs])) for xs in batches]
        return SymbolicBatch(way=f"tf.function with a None batch dimension on axis {axis} (one trace)",
                             outputs=tuple(outs))
