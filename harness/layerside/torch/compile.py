"""PyTorch: the framework's compiler (the ``compiled`` check) and the eager path it is compared with.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import torch

from ...protocol.compile import CompileProtocol, CompileStats


class TorchCompile(CompileProtocol):
    def compilers(self, backend=None):
        return [f"torch.compile(backend={backend or 'aot_eager'!r})"]

    def compile(self, fn, layer, compiler):
        import re
        return _Compiled(fn, re.search(r"backend='([^']+)'", compiler).group(1))

    def compiled_call(self, compiled, inputs, training=False):
        return compiled.run(lambda: self.call(compiled.fn, inputs, training=training))

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return compiled.run(lambda: self.vjp(compiled.fn, layer, inputs, wrt, cotangent))

    def compile_stats(self, compiled) -> CompileStats:
        return CompileStats(traces=compiled.traces, graphs=compiled.graphs, breaks=tuple(compiled.breaks),
                            guard_failures=tuple(compiled.guard_failures))


class _Compiled:
    """torch.compile of one layer or function, with a counting backend in front of the real one:
    every graph Dynamo captures passes through it (AOTAutograd then traces its backward)."""

    def __init__(self, fn, backend):
        from torch._dynamo.backends.registry import lookup_backend
        # a fresh Dynamo cache: the layer's forward code is shared by every instance of its class,
        # and an earlier check's entries would count against the recompile limit
        torch._dynamo.reset()
        real = lookup_backend(backend)
        self.graphs, self.traces, self.breaks, self.guard_failures = 0, 0, [], []

        def counting(gm, example_inputs):
            self.graphs += 1
            return real(gm, example_inputs)
        self.fn = torch.compile(fn, backend=counting)

    def run(self, thunk):
        from torch._dynamo.utils import counters, guard_failures
        breaks_before = dict(counters["graph_break"])
        guards_before = {code: len(v) for code, v in guard_failures.items()}
        graphs_before = self.graphs
        try:
            return thunk()
        finally:
            if self.graphs > graphs_before:
                self.traces += 1
            for reason, n in counters["graph_break"].items():
                if n > breaks_before.get(reason, 0):
                    self.breaks.append(str(reason).strip().splitlines()[0])
            for code, reasons in guard_failures.items():
                for r in reasons[guards_before.get(code, 0):]:
                    # "0/0: CFG['scale'] == 1.0   # return g * CFG['scale']  # file:line in backward"
                    self.guard_failures.append(" ".join(str(r).split("\n")[0].split()))
