"""MXNet Gluon 1.9.1: the ways real code builds a layer (the ``construction`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import warnings

import numpy as np
import mxnet as mx
from mxnet import gluon

from ...protocol import NotApplicable
from ...protocol.construction import ConstructionPart, ConstructionProtocol
from ...protocol.core import import_spec


def _said(exc) -> str:
    """'Type: message' in one line; for MXNet's C++ errors (a traceback of the engine's frames, then the
    message), the message."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = [lines[-1].removeprefix(f"{type(exc).__name__}: ")]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


class MXNetConstruction(ConstructionProtocol):
    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl

        def state(layer):
            return {n: p.data(p.list_ctx()[0]).asnumpy() for n, p in self._named(layer).items()}

        mx.random.seed(0)
        plain = self.construct(impl, constructor)
        if not isinstance(plain, gluon.Block):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not a Gluon block", code="not_a_module")
        if not self._named(plain):
            raise NotApplicable("the block holds no parameters: nothing for deferred initialisation to shape", code="no_state")
        want = state(self.build(plain, inputs))
        mx.random.seed(1)
        random = {n for n, v in state(self.build(self.construct(impl, constructor), inputs)).items()
                  if n in want and not np.array_equal(v, want[n], equal_nan=True)}
        # hybridize() is left to ``compiled``: a block that cannot be hybridized is that check's to name. The first
        # call is on another case's inputs where the contract has one: the shapes a deferred initialisation infers
        # must not depend on which batch comes first (a plain build's first call is on the first case's)
        first = inputs if other is None else other
        on = ", ".join(str(list(np.shape(a))) for a in first)
        built_on = ", ".join(str(list(np.shape(a))) for a in inputs)
        part = ("initialize() before the shapes are known, then a first call" +
                ("" if other is None else f" on another case's inputs ({on})"))
        mx.random.seed(0)
        layer = self.construct(impl, constructor)
        problems, raised = [], None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                layer.initialize()
            self.call(layer, first)
        except Exception as exc:
            raised = f"raised {_said(exc)}"
        try:  # a first call that raised may have finished the initialisation (its shapes say why it raised)
            got = state(layer)
        except Exception:
            return [ConstructionPart(part=part, problems=(raised or "left parameters uninitialised",), hint=None)]
        if raised:
            problems.append(f"the first call {raised}")
        shaped = False
        for n in sorted(set(want) | set(got)):
            if n not in got or n not in want:
                problems.append(f"{n!r} is {'missing' if n not in got else 'extra'} after deferred initialisation")
            elif got[n].shape != want[n].shape or got[n].dtype != want[n].dtype:
                shaped = True
                problems.append(f"{n!r} is {list(got[n].shape)} {got[n].dtype} after a first call on {on}, a plain "
                                f"build's (first call on {built_on}) {list(want[n].shape)} {want[n].dtype}")
            elif n in random:
                if not np.isfinite(got[n]).all():
                    problems.append(f"{n!r} (randomly initialised) is not finite")
            elif not np.array_equal(got[n], want[n], equal_nan=True):
                problems.append(f"{n!r} differs from a plain build's")
        if problems:
            problems[-1] += (": give a parameter's unknown dimensions as 0 (allow_deferred_init) and let the first "
                             "call infer them (infer_shape in hybrid_forward), with its initializer in params.get"
                             + ("; infer each from the axis it stands for (the features: X.shape[-1]), not from the "
                                "batch's other axes (nn.Dense(flatten=True)'s prod(X.shape[1:]))"
                                if shaped and other is not None else ""))
        return [ConstructionPart(part=part, problems=tuple(problems), hint=None)]
