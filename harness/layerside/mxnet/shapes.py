"""MXNet Gluon 1.9.1: shapes without data (the ``abstract`` check) and a symbolic batch axis.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import warnings

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable, NotApplicablePart
from ...protocol.shapes import AbstractWay, ShapesProtocol, SymbolicBatch
from ..common import abstract_error
from .core import _array


def _first_unknown(out, given, prefix="") -> str | None:
    """The first node of the graph ``out`` whose output shape infer_shape leaves unknown (empty, or with a 0:
    MXNet's unknown dimension) from the input shapes ``given``: the operator that makes a shape depend on values
    (named without ``prefix``, the block's, which counts the blocks made in the process)."""
    internals = out.get_internals()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, shapes, _ = internals.infer_shape_partial(**given)
    except Exception:  # noqa: BLE001 - only the words of a message depend on it
        return None
    for name, shape in zip(internals.list_outputs(), shapes):
        if not shape or 0 in shape:
            return name.removesuffix("_output").removeprefix(prefix)
    return None


class MXNetShapes(ShapesProtocol):
    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def _symbolic(self, layer, n):
        """The HybridBlock's graph on ``n`` input variables (x0, x1, ...), or NotApplicable."""
        if layer is None:
            raise NotApplicable("an MXNet function runs imperatively on NDArrays: only a HybridBlock's "
                                "hybrid_forward builds a symbolic graph to infer shapes from", code="imperative_function")
        if not isinstance(layer, gluon.HybridBlock):
            raise NotApplicable(f"{type(layer).__name__} is a gluon Block, not a HybridBlock: only a HybridBlock's "
                                f"hybrid_forward builds a symbolic graph to infer shapes from", code="not_hybrid")
        names = [f"x{i}" for i in range(n)]
        with autograd.predict_mode():
            out = layer(*[mx.sym.var(name) for name in names])
        if isinstance(out, (list, tuple)):
            raise TypeError(f"the symbolic call gives {len(out)} outputs, the layer one")
        return out, names

    def abstract_outputs(self, fn, layer, inputs):
        arrays = [np.asarray(a) for a in inputs]
        way = "the HybridBlock's symbolic graph (infer_shape, infer_type)"
        try:
            out, names = self._symbolic(layer, len(arrays))
            given = {k: a.shape for k, a in zip(names, arrays)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Cannot decide shape for the following arguments": said below
                _, shapes, _ = out.infer_shape(**given)
            _, types, _ = out.infer_type(**{k: a.dtype for k, a in zip(names, arrays)})
        except NotApplicable as exc:
            return [AbstractWay(way=way, not_applicable=NotApplicablePart(exc.reason, exc.code))]
        except Exception as exc:
            return [AbstractWay(way=way, error=abstract_error(exc))]
        if not shapes or shapes[0] is None:
            first = _first_unknown(out, given, layer.prefix)
            return [AbstractWay(way=way, error="infer_shape gives no output shape from the inputs' shapes ("
                                               + ", ".join(str(list(a.shape)) for a in arrays) + ")"
                                               + (f": the first unknown one is {first}'s, an operator whose output "
                                                  f"shape depends on the values (contrib.boolean_mask, a nonzero, a "
                                                  f"unique), known only by running it" if first else ""))]
        return [AbstractWay(way=way, shape=tuple(int(d) for d in shapes[0]), dtype=np.dtype(types[0]).name)]

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        out, names = self._symbolic(layer, len(batches[0]))
        params = {p.name: p.data(p.list_ctx()[0]) for p in layer.collect_params().values()}
        args = set(out.list_arguments())
        aux = out.list_auxiliary_states()
        outs = []
        for xs in batches:  # one graph, bound at each batch size
            given = {**{k: v for k, v in params.items() if k in args},
                     **{k: _array(a, mx.cpu(0)) for k, a in zip(names, xs)}}
            bound = out.bind(mx.cpu(0), args=given, aux_states={k: params[k] for k in aux}, grad_req="null")
            outs.append(bound.forward(is_train=False)[0].asnumpy())
        return SymbolicBatch(way=f"the HybridBlock's symbolic graph bound at each batch size (axis {axis})",
                             outputs=tuple(outs))
