"""TensorFlow (Keras 3): gradients: vjp, jvp, hvp and whether a custom rule is recorded.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...protocol.autodiff import AutodiffProtocol, Gradients, SecondOrder, Tangents


class TensorFlowAutodiff(AutodiffProtocol):
    # -- gradients ---------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs, wrt, cotangent):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        state = {**self.non_trainable(layer), **self.trainable(layer)}
        # The tape watches trainable variables by itself, as in training; non-trainable ones get None.
        with tf.GradientTape() as tape:
            for i in wrt:
                tape.watch(args[i])
            out = self.call(fn, args)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        ct = tf.cast(tf.constant(np.asarray(cotangent)), out.dtype)
        sources = [args[i] for i in wrt] + list(state.values())
        grads = tape.gradient(out, sources, output_gradients=ct) if sources else []
        input_grads = [None] * len(inputs)
        for i, g in zip(wrt, grads):
            input_grads[i] = g
        return Gradients(output=out, inputs=tuple(input_grads), state=dict(zip(state, grads[len(wrt):])))

    def custom_rule_recorded(self, fn, inputs, wrt):
        specs = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in inputs]
        graph = tf.function(lambda *xs: self.call(fn, list(xs))).get_concrete_function(*specs).graph
        # tf.custom_gradient marks the op whose gradient it overrides
        return any("_gradient_op_type" in op.node_def.attr for op in graph.get_operations())

    def jvp(self, fn, layer, inputs, tangents):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        pushed = [(x, tf.cast(tf.constant(np.asarray(t)), x.dtype)) for x, t in zip(args, tangents) if t is not None]
        with tf.autodiff.ForwardAccumulator([x for x, _ in pushed], [t for _, t in pushed]) as acc:
            out = self.call(fn, args)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        tangent = acc.jvp(out)  # None where the output does not depend on the tangents
        return Tangents(output=out, tangent=tf.zeros_like(out) if tangent is None else tangent)

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        sources = [args[i] for i in wrt]
        # the inner gradient runs inside the outer tape, which so records the backward rule's ops
        with tf.GradientTape() as outer:
            outer.watch(sources)
            with tf.GradientTape() as inner:
                inner.watch(sources)
                out = self.call(fn, args)
            if not isinstance(out, tf.Tensor):
                raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
            ct = tf.cast(tf.constant(np.asarray(cotangent)), out.dtype)
            grads = inner.gradient(out, sources, output_gradients=ct)
            dot = [tf.reduce_sum(g * tf.cast(tf.constant(np.asarray(directions[i])), g.dtype))
                   for i, g in zip(wrt, grads) if g is not None]
            total = tf.add_n(dot) if dot else None
        second = outer.gradient(total, sources) if total is not None else [None] * len(wrt)
        by_index = dict(zip(wrt, second))
        return SecondOrder(inputs=tuple(by_index.get(i) for i in range(len(inputs))))
