"""MXNet Gluon 1.9.1: memory layouts, aliased inputs and what a call does to its inputs.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable
from ...protocol.layout import InputChanges, LayoutProtocol
from .core import _array


class MXNetLayout(LayoutProtocol):
    def aliased_vjp(self, fn, inputs, i, j, cotangent, compiled=None):
        if getattr(fn, "function", None) is not None:
            raise NotApplicable("an MXNet 1.9.1 autograd.Function gives no gradient at all to one array passed for "
                                "two of its inputs (a correct rule gets zeros: the framework's limitation, which "
                                "the layer cannot change)", code="function_alias_gradient")
        return super().aliased_vjp(fn, inputs, i, j, cotangent, compiled)

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        args = [_array(a) for a in inputs]
        before = [a.asnumpy().copy() for a in args]
        for i in wrt:
            args[i].attach_grad()
        if isinstance(layer, gluon.Block):
            layer.collect_params().zero_grad()
        changed = lambda: [i for i, (a, b) in enumerate(zip(args, before))
                           if not np.array_equal(a.asnumpy(), b, equal_nan=True)]
        with autograd.record(train_mode=False):
            out = fn(*args)
        forward = changed()
        backward, grads = [], [None] * len(inputs)
        if wrt and cotangent is not None and isinstance(out, mx.nd.NDArray):
            cotangent = np.asarray(cotangent)
            if cotangent.size == out.size:
                cotangent = cotangent.reshape(out.shape)
            try:
                out.backward(_array(cotangent, out.ctx, dtype=out.dtype))
                mx.nd.waitall()
                grads = [args[i].grad.copy() if i in wrt else None for i in range(len(inputs))]
            except mx.base.MXNetError as exc:
                if "not in a computational graph" not in str(exc):
                    raise
            backward = [i for i in changed() if i not in forward]
        return InputChanges(forward=tuple(forward), backward=tuple(backward), versions=None, output=out,
                            input_grads=tuple(grads), state_grads={})
