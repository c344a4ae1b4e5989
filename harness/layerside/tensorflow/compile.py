"""TensorFlow (Keras 3): the framework's compiler (the ``compiled`` check) and the eager path it is compared with.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from ...protocol.autodiff import Gradients
from ...protocol.compile import CompileProtocol, CompileStats


class TensorFlowCompile(CompileProtocol):
    retraces_per_shape = True

    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["tf.function", "tf.function(jit_compile=True)"]

    def compile(self, fn, layer, compiler):
        if "jit_compile=True" in compiler:
            _xla_backend_unoptimized()
        return _Compiled(self, fn, layer, jit_compile="jit_compile=True" in compiler)

    def compiled_call(self, compiled, inputs, training=False):
        return compiled.forward(*[tf.constant(np.asarray(a)) for a in inputs], training=training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return compiled.vjp(layer, [tf.constant(np.asarray(a)) for a in inputs], wrt, np.asarray(cotangent))

    def compile_stats(self, compiled) -> CompileStats:
        return CompileStats(traces=compiled.traces, graphs=compiled.traces)


def _xla_backend_unoptimized() -> None:
    """XLA's CPU backend generates code at LLVM's -O0 unless XLA_FLAGS sets the level (the full compiler:
    ``XLA_FLAGS=--xla_backend_optimization_level=3``). The check still runs XLA's whole HLO pipeline,
    where a layer's meaning can change (clustering, fusion, the custom gradient), in about a fifth less
    time. XLA reads the flags once, at its first compile in the process: later, this changes nothing."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0".strip()


def _traced_by_the_harness(fn, jit_compile):
    """A tf.function the harness traces once per case shape, on purpose. TensorFlow warns of frequent
    retracing ("WARNING:tensorflow:5 out of the last 6 calls to <function _Compiled.vjp.<locals>.step>"),
    which reads as if the user's layer retraced: the switch TensorFlow sets on its own functions that retrace
    for a reason (restored SavedModel functions) turns it off for these alone."""
    function = tf.function(fn, jit_compile=jit_compile)
    function._omit_frequent_tracing_warning = True
    return function


class _Compiled:
    """The layer's call, and a whole gradient step (tape inside, as in a compiled training step),
    each a tf.function; ``traces`` counts the times the user's Python ran while tracing."""

    def __init__(self, adapter, fn, layer, jit_compile):
        self.traces = 0
        self._steps = {}
        self._adapter, self._layer, self._jit = adapter, layer, jit_compile

        def forward(*xs, training=False):
            self.traces += 1
            return adapter.call(fn, list(xs), training=training)
        self._python_forward = forward
        self.forward = _traced_by_the_harness(forward, jit_compile)

    def vjp(self, layer, args, wrt, cotangent):
        key = tuple(wrt)
        if key not in self._steps:
            adapter, forward = self._adapter, self._python_forward
            state = {**adapter.non_trainable(layer), **adapter.trainable(layer)}

            def step(xs, ct):
                xs = list(xs)
                with tf.GradientTape() as tape:
                    for i in wrt:
                        tape.watch(xs[i])
                    out = forward(*xs)
                if not isinstance(out, tf.Tensor):
                    raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
                sources = [xs[i] for i in wrt] + list(state.values())
                grads = tape.gradient(out, sources, output_gradients=tf.cast(ct, out.dtype)) if sources else []
                return out, grads
            self._steps[key] = (_traced_by_the_harness(step, self._jit), list(state))
        step, names = self._steps[key]
        out, grads = step(args, tf.constant(cotangent))
        grads = list(grads)
        input_grads = [None] * len(args)
        for i, g in zip(wrt, grads):
            input_grads[i] = g
        return Gradients(output=out, inputs=tuple(input_grads), state=dict(zip(names, grads[len(wrt):])))
