"""MXNet Gluon 1.9.1: the vectorising transform (``vmap``).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

from ...protocol import NotApplicable
from ...protocol.batching import BatchingProtocol


class MXNetBatching(BatchingProtocol):
    _NO_VMAP = ("MXNet 1.9.1 has no vectorising transform (no vmap): only the comparison with examples run alone, "
                "permuted and changed runs")

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        raise NotApplicable(self._NO_VMAP, code="no_vmap")

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        raise NotApplicable(self._NO_VMAP, code="no_vmap")
