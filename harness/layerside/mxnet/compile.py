"""MXNet Gluon 1.9.1: the framework's compiler (the ``compiled`` check) and the eager path it is compared with.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import mxnet as mx
from mxnet import gluon

from ...protocol import NotApplicable
from ...protocol.compile import CompileProtocol, CompileStats


class MXNetCompile(CompileProtocol):
    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["hybridize()"]

    def compile(self, fn, layer, compiler):
        if layer is None:
            raise NotApplicable("an autograd.Function runs imperatively on NDArrays: MXNet 1.9.1 cannot place it "
                              "in a hybridized graph, so a function contract has nothing to hybridize", code="imperative_function")
        if not isinstance(layer, gluon.HybridBlock):
            raise NotApplicable(f"{type(layer).__name__} is a gluon Block, not a HybridBlock: only a HybridBlock's "
                              f"hybrid_forward compiles to a graph (hybridize() on a Block hybridizes only its "
                              f"HybridBlock children)", code="not_hybrid")
        return _Hybridized(layer)

    def compiled_call(self, compiled, inputs, training=False):
        return self.call(compiled.layer, inputs, training=training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return self.vjp(compiled.layer, compiled.layer, inputs, wrt, cotangent)

    def compile_stats(self, compiled) -> CompileStats:
        return CompileStats(traces=compiled.traces, graphs=compiled.traces)


class _Hybridized:
    """The layer after ``hybridize()``; ``traces`` counts hybrid_forward runs on Symbols (graph
    construction), wrapped on the instance so that the class is left alone."""

    def __init__(self, layer):
        self.layer, self.traces = layer, 0
        original = layer.hybrid_forward

        def counting(F, *args, **kwargs):
            if F is mx.sym or any(isinstance(a, mx.sym.Symbol) for a in args):
                self.traces += 1
            return original(F, *args, **kwargs)
        layer.hybrid_forward = counting
        layer.hybridize()
