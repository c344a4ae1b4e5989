"""Shapes without data: ``abstract``. The output's shape and dtype computed without values, and a program
with a symbolic batch dimension, agree with the eager layer.

Once per target, on the first case, in evaluation mode, the layer compared with itself (not with the
reference): each of the framework's ways to compute the output's shape and dtype without data (torch's
``FakeTensorMode`` and the ``meta`` device; Keras' call on ``KerasTensor`` inputs and ``compute_output_shape``
where the layer overrides it; ``jax.eval_shape`` / ``nnx.eval_shape``; MXNet's symbolic shape inference of a
HybridBlock) against the eager output's; then, where the first case's inputs share a batch axis
(``batching``'s axis, on its first case) of two or more examples, one program with that axis symbolic
(``torch.export`` with ``Dim("batch")``, ``jax.export`` with a symbolic ``b``, ``tf.function`` with a ``None``
batch dimension, traced once) run at the case's batch and at twice it, against the eager outputs at both.
Cost: one abstract evaluation per way, one trace or export, four calls.
"""
from __future__ import annotations

import numpy as np

from ..compare import describe_mismatch
from ..protocol import NotApplicablePart
from ..record import NotApplicable
from .base import CheckFailed, unexpected_error
from .common import batch_of
from .mistakes import hint
from .base import adapter_part

# the frameworks' words for a value read where there is none (a fake, meta or symbolic tensor, a tracer)
_VALUE_READ = ("data-dependent", "DataDependent", "GuardOnDataDependent", "item()", ".item", "Cannot access data",
               "meta tensor", "TracerBoolConversionError", "ConcretizationTypeError", "TracerArrayConversionError",
               "TracerIntegerConversionError", "OperatorNotAllowedInGraphError", "numpy() is only available",
               "Cannot convert a symbolic", "asnumpy", "not allowed in Graph",
               "__bool__", "__array__", "has no attribute 'numpy'", "Could not guard on data-dependent",
               "Expected a concrete", "Abstract tracer value")
_FIXED = ("Constraints violated", "specialized", "specialization", "not a multiple", "inferred to be a constant",
          "shape mismatch", "Incompatible shapes", "cannot reshape", "reshape", "shape '[", "size mismatch")


def _why(exc_or_text, fw, fixed=False) -> str:
    """The hint, in ``fw``'s words, for what was raised without data ('' where none fits)."""
    text = exc_or_text if isinstance(exc_or_text, str) else f"{type(exc_or_text).__name__}: {exc_or_text}"
    if "at least two devices" in text or "is not on the expected device" in text:
        return ". " + hint("abstract_held_tensor", fw)
    if any(k in text for k in _VALUE_READ):
        return ". " + hint("abstract_reads_value", fw)
    if fixed and any(k in text for k in _FIXED):
        return ". " + hint("abstract_fixed_batch", fw)
    return ""


def _doubled(inputs, batched, axis):
    """The inputs with their batch twice as long (the examples repeated), the shared inputs as they are."""
    return [np.concatenate([a, a], axis=axis) if b else a for a, b in zip(inputs, batched)]


def check_abstract(ctx):
    spec = ctx.contract.abstract  # applicable: layer_conformance.checks.applicable
    contract, axis = ctx.contract, ctx.contract.batching.axis
    case = contract.cases[0]
    inputs = ctx.case_inputs(case)
    layer, _, _ = ctx.layer_at(ctx.test_state())
    fn = ctx.callable(layer)

    def eager(xs, what):
        try:
            out = ctx.run(layer, xs)
        except Exception as exc:
            raise CheckFailed(f"case {case.name!r}: the layer raised {what}: {unexpected_error(exc)}") from exc
        return ctx.output_numpy(out, f"the output {what}"), ctx.adapter.dtype_name(out)

    full, dtype = eager(inputs, "eagerly")
    details, problems, said, na = {}, [], [], []
    ways = ctx.adapter.abstract_outputs(fn, layer, inputs)
    hints, fw = {}, ctx.adapter.name  # each hint once (in the framework's words), after the problems it explains
    for w in ways:
        way = w.way
        if w.not_applicable:
            na.append(w.not_applicable.reason)
            said.append(f"{way} n/a: {w.not_applicable.reason}")
        elif w.error:
            problems.append(f"case {case.name!r}: the output's shape without data ({way}) failed: {w.error}")
            hints[_why(w.error, fw) or ". " + hint("abstract_output_shape", fw)] = None
        elif list(w.shape) != list(full.shape) or w.dtype not in (None, dtype):
            what = f"shape {list(w.shape)}" + (f" and dtype {w.dtype}" if w.dtype else "")
            problems.append(f"case {case.name!r}: {way} gives an output of {what}, the eager call "
                            f"{list(full.shape)}" + (f" and {dtype}" if w.dtype else ""))
            hints[". " + hint("abstract_output_shape", fw)] = None
        else:
            said.append(f"{way} agrees")
    if problems:
        raise CheckFailed("; ".join(problems) + "".join(hints))

    batch = _batch_part(ctx, fn, layer, case, inputs, axis, full, dtype, eager)
    details["symbolic_batch"] = str(batch)
    details["without_data"] = "; ".join(said) or "n/a"
    if len(na) == len(said) and isinstance(batch, NotApplicablePart):
        # nothing ran: the framework holds this layer no way without data
        raise NotApplicable("; ".join(dict.fromkeys(na + [batch.reason])), code="parts")
    return details


def _batch_part(ctx, fn, layer, case, inputs, axis, full, dtype, eager) -> str | NotApplicablePart:
    """The symbolic batch on batching's first case (the first case where batching names none): what it showed,
    in words, or why it is n/a."""
    batching = ctx.contract.batching
    if batching.not_applicable:
        return NotApplicablePart(f"the contract has no batch axis (batching: {batching.not_applicable})")
    if batching.cases and case.name not in batching.cases:
        case = next(c for c in ctx.contract.cases if c.name == batching.cases[0])
        inputs = ctx.case_inputs(case)
        full = eager(inputs, f"eagerly on case {case.name!r}")[0]
    batched, n = batch_of(inputs, axis)
    if batched is None:
        return NotApplicablePart(f"case {case.name!r} has no batch to leave symbolic ({n})")
    return _symbolic(ctx, fn, layer, case, inputs, batched, n, axis, full, eager)


def _symbolic(ctx, fn, layer, case, inputs, batched, n, axis, full, eager):
    name = case.name
    bigger = _doubled(inputs, batched, axis)
    # before the eager call on the bigger batch: where the framework has no such program, nothing more runs
    got, not_run = adapter_part(
        ctx, "symbolic_batch", fn, layer, [inputs, bigger], batched, axis,
        failed=lambda exc: f"case {name!r}: the layer with a symbolic batch dimension (axis {axis}) raised "
                           f"{unexpected_error(exc)}" + (_why(exc, ctx.adapter.name, fixed=True)
                                                         or ". " + hint("abstract_fixed_batch", ctx.adapter.name)))
    if not_run:
        return not_run
    want = [full, eager(bigger, f"eagerly on a batch of {2 * n}")[0]]
    problems, same_batch = [], False
    for size, out, w in zip((n, 2 * n), got.outputs, want):
        out = np.asarray(out)
        if list(out.shape) != list(w.shape):
            problems.append(f"case {name!r}: {got.way} at a batch of {size} gives shape {list(out.shape)}, the "
                            f"eager call {list(w.shape)}")
            continue
        rtol, atol = ctx.tolerance("abstract", str(w.dtype))
        diff = describe_mismatch(out, w, rtol, atol, what=f"case {name!r}: {got.way} at a batch of {size} "
                                                          f"against the eager call")
        if diff:
            problems.append(diff)
            same_batch = same_batch or size == n
    if same_batch:  # wrong at the very batch it was traced with: not the batch, the trace
        raise CheckFailed("; ".join(problems) + ": the traced program computes otherwise than the eager call at the "
                                                "batch it was traced with (a Python side effect or state kept in "
                                                "Python, baked into the program when it was traced)")
    if problems:
        raise CheckFailed("; ".join(problems) + ". " + hint("abstract_fixed_batch", ctx.adapter.name))
    return f"{got.way} agrees at batches of {n} and {2 * n}"
