"""TensorFlow (Keras 3): the vectorising transform (``vmap``).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import tensorflow as tf

from ...protocol import NotApplicablePart
from ...protocol.batching import BatchingProtocol, VmapGrads


class TensorFlowBatching(BatchingProtocol):
    # -- the vectorising transform (the batching check) ---------------------------------------
    @staticmethod
    def _vectorized(per_example, args, in_axes, axis):
        """tf.vectorized_map of ``per_example(*example)``, each example keeping a batch axis of one (a Keras
        layer is written for a batch: tf.matmul refuses a vector), the output's batch axis at ``axis``;
        shared inputs are closed over."""
        mapped = [i for i, a in enumerate(in_axes) if a is not None]

        def one(elems):
            full = list(args)
            for i, x in zip(mapped, elems):
                full[i] = tf.expand_dims(x, in_axes[i])
            return tf.nest.map_structure(lambda o: tf.squeeze(o, axis), per_example(*full))
        out = tf.vectorized_map(one, [tf.experimental.numpy.moveaxis(args[i], in_axes[i], 0) for i in mapped])
        return tf.nest.map_structure(lambda o: tf.experimental.numpy.moveaxis(o, 0, axis), out)

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        return self._vectorized(lambda *xs: self.call(fn, list(xs)), args, in_axes, axis)

    # measured (TF 2.21): the gradient of a tf.vectorized_map program is that of the program pfor made, in which
    # a tf.custom_gradient rule is not kept (scaled_tanh's halved gradient comes back whole); no reason code of
    # ``check_catalog.NA_REASONS`` names this limit, so the part carries none
    _NO_GRAD_OF_VMAP = NotApplicablePart("TensorFlow differentiates tf.vectorized_map's vectorised program, which "
                                         "does not keep a tf.custom_gradient rule")

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        ct = self.tensor(cotangent)

        def one(*xs_ct):
            *xs, c = xs_ct
            xs = list(xs)
            with tf.GradientTape() as tape:
                for i in wrt:
                    tape.watch(xs[i])
                o = self.call(fn, xs)
            grads = tape.gradient(o, [xs[i] for i in wrt], output_gradients=tf.cast(c, o.dtype))
            return [tf.zeros_like(xs[i]) if g is None else g for i, g in zip(wrt, grads)]
        per = self._vectorized(one, args + [ct], list(in_axes) + [axis], axis)
        vmap_of_grad = dict(zip(wrt, per))
        return VmapGrads(grad_of_vmap=self._NO_GRAD_OF_VMAP,
                         vmap_of_grad=tuple(vmap_of_grad.get(i) for i in range(len(inputs))))
