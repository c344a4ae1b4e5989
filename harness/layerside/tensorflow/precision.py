"""TensorFlow (Keras 3): dtypes and mixed precision.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect

import numpy as np
import keras
import tensorflow as tf

from ...protocol import NotApplicable
from ...protocol.core import CoreProtocol, import_spec
from ...protocol.precision import MixedPrecisionPolicy, MixedPrecisionRun, PrecisionProtocol
from .core import _MADE


class TensorFlowPrecision(PrecisionProtocol):
    def to_dtype(self, layer, dtype):
        """A twin in ``dtype``: the same class rebuilt under that dtype policy, with the weights copied."""
        if not isinstance(layer, keras.layers.Layer):
            return layer
        if getattr(layer.dtype_policy, "name", None) == dtype:  # made in it (a container nest() built)
            return layer
        made = _MADE.get(layer)  # as the harness made it, under the dtype policy below
        auto = getattr(getattr(layer, "_auto_config", None), "config", None)  # the constructor's arguments
        makers = [lambda: CoreProtocol.construct(self, *made)] if made is not None else []
        makers += [lambda: type(layer)(**{**auto, **({"dtype": dtype} if "dtype" in auto else {})})] \
            if auto is not None else []
        makers.append(lambda: type(layer).from_config({**layer.get_config(), "dtype": dtype}))
        previous = keras.config.dtype_policy()
        for make in makers:
            keras.config.set_dtype_policy(dtype)
            try:
                twin = make()
                twin.build_from_config(layer.get_build_config())
                twin.set_weights([np.asarray(w).astype(v.dtype) for w, v in zip(layer.get_weights(), twin.weights)])
            except Exception:
                continue
            finally:
                keras.config.set_dtype_policy(previous)
            # a weight created with an explicit float32 dtype would mix precisions in the twin
            return twin if all(w.dtype == dtype for w in twin.weights if "float" in w.dtype) else None
        return None

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _POLICIES = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}

    def mixed_precision_policies(self, obj, function=False):
        if function or not (inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)):
            raise NotApplicable("a Keras dtype policy belongs to a layer; a function computes in its inputs' dtypes", code="no_precision_policy")
        return [MixedPrecisionPolicy(policy=name, variables="float32", compute=compute, output=compute,
                                     states_compute=True) for name, compute in self._POLICIES.items()]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        init = getattr(impl, "__init__", None)
        params = inspect.signature(init).parameters.values() if init is not None else ()
        takes_dtype = any(p.name == "dtype" or p.kind is p.VAR_KEYWORD for p in params)
        previous = keras.config.dtype_policy()
        if takes_dtype:
            # the layer's own policy, as Keras's run_layer_test does: nothing global changes
            mechanism = f"{impl.__name__}(..., dtype={policy!r})"
            layer = self.construct(impl, {**constructor, "dtype": policy})
        else:
            mechanism = f"keras.config.set_dtype_policy({policy!r}) around the constructor (it takes no dtype=)"
            keras.config.set_dtype_policy(policy)
            try:
                layer = self.construct(impl, constructor)
            finally:
                keras.config.set_dtype_policy(previous)
        self.build(layer, inputs)
        for name, value in (assign or {}).items():
            self.assign(layer, name, value)
        args = [self.tensor(a) for a in inputs]
        trainable = self.trainable(layer)
        with tf.GradientTape() as tape:
            for i in wrt:
                tape.watch(args[i])
            out = layer(*args, training=False)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        grads, input_grads = {n: None for n in trainable}, [None] * len(args)
        if cotangent is not None:
            sources = [args[i] for i in wrt] + list(trainable.values())
            got = tape.gradient(out, sources, output_gradients=tf.cast(tf.constant(np.asarray(cotangent)), out.dtype))
            for i, g in zip(wrt, got):
                input_grads[i] = None if g is None else self.dtype_name(g)
            grads = {n: None if g is None else self.dtype_name(g) for n, g in zip(trainable, got[len(wrt):])}
        values = tf.cast(out, tf.float32) if out.dtype in (tf.float16, tf.bfloat16) else out
        return MixedPrecisionRun(mechanism=mechanism, output_dtype=self.dtype_name(out),
                                 output=np.asarray(values.numpy()),
                                 variables={n: self.dtype_name(v) for n, v in self._named(layer).items()},
                                 compute_dtype=keras.backend.standardize_dtype(layer.compute_dtype), gradients=grads,
                                 input_dtypes=tuple(self.dtype_name(a) for a in args),
                                 input_gradients=tuple(input_grads), notes=())
