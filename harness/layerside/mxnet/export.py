"""MXNet Gluon 1.9.1: whole-layer formats (the ``export`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import os
import warnings

import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable
from ...protocol.export import ExportNotes, ExportProtocol


class MXNetExport(ExportProtocol):
    def export_formats(self, obj):
        if isinstance(obj, gluon.HybridBlock):
            return ["gluon.export"]
        if isinstance(obj, gluon.Block):
            raise NotApplicable("a gluon Block (not a HybridBlock) has no symbolic graph: Gluon 1.9.1 saves a whole "
                              "layer only through HybridBlock.hybridize() + export", code="not_hybrid")
        raise NotApplicable("an autograd.Function runs imperatively only: Gluon 1.9.1 has no format that saves it", code="imperative_function")

    def export_save(self, obj, fmt, examples, path):
        if fmt != "gluon.export":
            raise NotApplicable(f"{fmt} is not a Gluon format", code="no_format")
        os.makedirs(path, exist_ok=True)
        obj.hybridize()
        with autograd.predict_mode():
            self.call(obj, examples[0])  # export needs one hybridized call to have built the graph
        obj.export(os.path.join(path, "layer"), epoch=0)
        return ExportNotes(gradients="kept")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        if fmt != "gluon.export":
            raise NotApplicable(f"{fmt} is not a Gluon format", code="no_format")
        symbol, params = os.path.join(path, "layer-symbol.json"), os.path.join(path, "layer-0000.params")
        # the graph's inputs are its arguments that the parameter file does not hold
        held = {k.split(":", 1)[-1] for k in mx.nd.load(params)}
        names = [n for n in mx.sym.load(symbol).list_inputs() if n not in held]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            block = gluon.SymbolBlock.imports(symbol, names, params, ctx=mx.cpu(0))
        return block, block
