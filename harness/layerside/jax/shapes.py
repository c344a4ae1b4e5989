"""JAX (Flax NNX): shapes without data (the ``abstract`` check) and a symbolic batch axis.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import jax
import numpy as np
from flax import nnx

from ...protocol.shapes import AbstractWay, ShapesProtocol, SymbolicBatch
from ..common import abstract_error
from .core import _Compiled, _wants_x64, _x64


class JaxShapes(ShapesProtocol):
    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        with _x64(_wants_x64(*inputs)):
            # 0-d inputs (a setting, as JAX's nondiff_argnums takes it) stay Python scalars, as in ``compile``
            static = _Compiled._static([np.asarray(a) for a in inputs], ())
            shapes = [None if i in static else jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)
                      for i, a in enumerate(inputs)]
            full = lambda xs: [static.get(i, a) for i, a in enumerate(xs)]  # noqa: E731
            if isinstance(layer, nnx.Module):
                layer.eval()
                way, run = "nnx.eval_shape", lambda: nnx.eval_shape(lambda model, *xs: model(*full(xs)), layer,
                                                                    *shapes)
            else:
                way, run = "jax.eval_shape", lambda: jax.eval_shape(lambda *xs: fn(*full(xs)), *shapes)
            try:
                out = run()
            except Exception as exc:
                return [AbstractWay(way=way, error=abstract_error(exc))]
        if not hasattr(out, "shape") or not hasattr(out, "dtype"):
            return [AbstractWay(way=way, error=f"a {type(out).__name__}, not an array")]
        return [AbstractWay(way=way, shape=tuple(out.shape), dtype=str(out.dtype))]

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        from jax import export
        first = batches[0]
        with _x64(_wants_x64(*first)):
            (b,) = export.symbolic_shape("b")
            static = _Compiled._static([np.asarray(a) for a in first], ())
            specs = []
            for i, (a, on) in enumerate(zip(first, batched)):
                shape = list(np.shape(a))
                if on:
                    shape[axis] = b
                specs.append(None if i in static else jax.ShapeDtypeStruct(tuple(shape), np.asarray(a).dtype))
            full = lambda xs: [static.get(i, a) for i, a in enumerate(xs)]  # noqa: E731
            arrays = lambda xs: [None if i in static else self.tensor(a) for i, a in enumerate(xs)]  # noqa: E731
            if isinstance(layer, nnx.Module):
                layer.eval()
                graphdef, state = nnx.split(layer)
                program = export.export(jax.jit(lambda st, *xs: nnx.merge(graphdef, st)(*full(xs))))(state, *specs)
                run = lambda xs: program.call(state, *arrays(xs))  # noqa: E731
            else:
                program = export.export(jax.jit(lambda *xs: fn(*full(xs))))(*specs)
                run = lambda xs: program.call(*arrays(xs))  # noqa: E731
            outs = [np.asarray(jax.device_get(run(xs))) for xs in batches]
        return SymbolicBatch(way=f"jax.export with a symbolic batch b on axis {axis}", outputs=tuple(outs))
