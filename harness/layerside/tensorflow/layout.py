"""TensorFlow (Keras 3): memory layouts, aliased inputs and what a call does to its inputs.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

from ...protocol import NotApplicable
from ...protocol.layout import LayoutProtocol


class TensorFlowLayout(LayoutProtocol):
    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        raise NotApplicable(self.immutable_arrays, code="immutable_arrays")
