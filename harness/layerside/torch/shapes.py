"""PyTorch: shapes without data (the ``abstract`` check) and a symbolic batch axis.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import copy

import torch

from ...protocol import NotApplicable
from ...protocol.shapes import AbstractWay, ShapesProtocol, SymbolicBatch
from ..common import abstract_error
from .core import _Calls, _custom_functions, _plain


class TorchShapes(ShapesProtocol):
    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        import copy
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.func import functional_call
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        module = fn if isinstance(fn, torch.nn.Module) else None
        if module is not None:
            module.train(False)
        ways = []

        def said(way, run):
            try:
                with torch.no_grad():
                    out = run()
            except Exception as exc:
                return ways.append(AbstractWay(way=way, error=abstract_error(exc)))
            if not isinstance(out, torch.Tensor):
                return ways.append(AbstractWay(way=way, error=f"a {type(out).__name__}, not a tensor"))
            ways.append(AbstractWay(way=way, shape=tuple(out.shape), dtype=self.dtype_name(out)))

        def fake():
            mode = FakeTensorMode(allow_non_fake_inputs=True)
            xs = [mode.from_tensor(a) for a in args]
            if module is None:
                with mode:
                    return fn(*xs)
            state = {n: mode.from_tensor(t) for n, t in [*module.named_parameters(), *module.named_buffers()]}
            with mode:
                return functional_call(module, state, tuple(xs))
        said("torch FakeTensorMode", fake)

        def meta():
            xs = [a.to("meta") for a in args]
            if module is None:
                return fn(*xs)
            return copy.deepcopy(module).to("meta")(*xs)
        said("the meta device", meta)
        return ways

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        module = fn if isinstance(fn, torch.nn.Module) else _Calls(fn)
        module.train(False)
        first = tuple(self.tensor(a) for a in batches[0])
        batch = torch.export.Dim("batch")
        dims = tuple({axis: batch} if b else None for b in batched)
        dims = (dims,) if isinstance(module, _Calls) else dims  # _Calls.forward(*xs) takes one tuple
        try:
            program = torch.export.export(module, first, dynamic_shapes=dims).module()
        except Exception:
            custom = _custom_functions(module, first)
            if custom:
                raise NotApplicable(f"torch.export cannot hold the custom autograd.Function(s) {', '.join(custom)} "
                                    f"with a symbolic batch, as the export check says", code="untraceable") from None
            raise
        outs = []
        with torch.no_grad():
            for xs in batches:
                outs.append(_plain(program(*[self.tensor(a) for a in xs])))
        return SymbolicBatch(way=f"torch.export with Dim('batch') on axis {axis}", outputs=tuple(outs))
