"""MXNet Gluon 1.9.1: gradients: vjp, jvp, hvp and whether a custom rule is recorded.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable
from ...protocol.autodiff import AutodiffProtocol, Gradients
from .core import _array


def _function_backward_error(printed: str) -> str:
    """The traceback mxnet printed for a raising Function.backward, as one line: the error and
    the deepest frame outside mxnet."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    frames = [line for line in lines if line.startswith("File ") and '.py"' in line and "site-packages" not in line]
    where = f" ({frames[-1]})" if frames else ""
    return f"autograd.Function.backward raised {lines[-1]}{where}"


class MXNetAutodiff(AutodiffProtocol):
    # -- gradients -------------------------------------------------------------------------
    def custom_rule_recorded(self, fn, inputs, wrt):
        args = [a.copy() if isinstance(a, mx.nd.NDArray) else _array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        with autograd.record(train_mode=False):
            out = fn(*args)
        if not isinstance(out, mx.nd.NDArray):
            return None
        try:
            graph = json.loads(autograd.get_symbol(out).tojson())
        except mx.base.MXNetError:  # nothing recorded: the output depends on no input
            return False
        if not any(node["op"] == "_CustomFunction" for node in graph["nodes"]):  # a Function called as one
            return False
        # MXNet 1.9.1's Function writes no input gradient after the first input that wants none: the rule ran,
        # but what it returns never reaches those inputs, as if it had not run for them
        return not any(j not in wrt and j < max(wrt) for j in range(len(args))) if wrt else True

    def vjp(self, fn, layer, inputs, wrt, cotangent):
        args = [a.copy() if isinstance(a, mx.nd.NDArray) else _array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        state = {}
        if isinstance(layer, gluon.Block):
            state = {**self.non_trainable(layer), **self.trainable(layer)}
            layer.collect_params().zero_grad()  # Parameter.zero_grad fails under npx.set_np()
        with autograd.record(train_mode=False):
            out = fn(*args)
        if not isinstance(out, mx.nd.NDArray):
            raise TypeError(f"the output is a {type(out).__name__}, not an MXNet array")
        cotangent = np.asarray(cotangent)
        if cotangent.size == out.size:  # a scalar output is (1,) on legacy arrays, its cotangent ()
            cotangent = cotangent.reshape(out.shape)
        printed = io.StringIO()
        try:
            # a Function.backward that raises is only printed by mxnet; the engine's own error,
            # raised at the next read, names none of it
            with contextlib.redirect_stdout(printed):
                out.backward(_array(cotangent, out.ctx, dtype=out.dtype))
                mx.nd.waitall()
            input_grads = [self._grad_like(args[i].grad, inputs[i]) if i in wrt else None
                           for i in range(len(inputs))]
        except mx.base.MXNetError as exc:
            if "Error in Function.backward" in printed.getvalue():
                raise RuntimeError(_function_backward_error(printed.getvalue())) from None
            if "not in a computational graph" not in str(exc):
                raise
            input_grads = [None] * len(inputs)  # the output does not depend on any input
        print(printed.getvalue(), end="")  # what the layer itself printed
        state_grads = {n: None if p.grad_req == "null" else p.grad(p.list_ctx()[0]).copy()
                       for n, p in state.items()}
        return Gradients(output=out, inputs=tuple(input_grads), state=state_grads)

    @staticmethod
    def _grad_like(grad, x):
        # a 0-d input travelled as shape (1,) (see _array): its gradient goes back as numpy, 0-d
        if grad.shape != tuple(np.shape(x)) and grad.size == 1 and not np.shape(x):
            return grad.asnumpy().reshape(())
        return grad.copy()

    def jvp(self, fn, layer, inputs, tangents):
        raise NotApplicable("MXNet 1.9.1 has no forward-mode differentiation (autograd is reverse mode only)", code="no_forward_mode")

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        # measured: autograd.grad(create_graph=True) through an autograd.Function gives a gradient
        # outside the graph ("There are no inputs in computation graph that require gradients")
        raise NotApplicable("MXNet 1.9.1 cannot differentiate twice through autograd.Function (its backward "
                           "is not recorded) and many backward operators register no gradient", code="no_double_backward")
