"""Example independence: ``batching``. Each example's output depends on that example alone.

The layer is compared with itself, not with the reference: on each case whose inputs share a batch axis
(``batching.axis``, default 0), the whole batch against examples run alone (batches of one), the batch
permuted, and the batch with one example changed (no other example's output may move: the Jacobian is
block-diagonal across examples); then once per target the framework's vectorising transform (``jax.vmap``
/ ``nnx.vmap``, ``torch.func.vmap`` over ``functional_call``, ``tf.vectorized_map``), twice on the same
layer (a second call that differs keeps Python state between calls); for a function contract with
gradients, the gradient of the vectorised function and the vectorised gradient against the plain
batch's, which are per-example gradients when the examples are independent. Inputs of rank no more than
the axis (a scalar setting) are shared by every example. Cost: a few calls per case, the inputs the cases
already have.
"""
from __future__ import annotations

import numpy as np

from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from ..dtypes import is_floating
from ..protocol import NotApplicablePart
from ..record import NotApplicable
from .base import CheckFailed, unexpected_error
from .common import batch_of
from .mistakes import hint
from .base import adapter_part


def _value_read(ctx, exc) -> str:
    """The hint where the framework's error says the layer read a value under the transform."""
    text = f"{type(exc).__name__}: {exc}"
    if "UnexpectedTracerError" in text and "BatchTracer" in text:
        return ". " + hint("batching_closed_over")
    if any(k in text for k in ("data-dependent control flow", "TracerBoolConversionError", "ConcretizationTypeError",
                               "TracerArrayConversionError", "TracerIntegerConversionError")):
        return ". " + hint("batching_reads_value")
    return ""


def _take(a, idx, axis):
    return np.take(a, idx, axis=axis)


def _changed(a, j, k, axis):
    """``a`` with example ``j`` replaced by example ``k`` (in the inputs' own range); where the two are the
    same, example ``j`` halved and shifted instead."""
    out = np.array(a, copy=True)
    src = np.take(a, k, axis=axis)
    here = np.take(a, j, axis=axis)
    if np.array_equal(src, here, equal_nan=True):
        src = (here.astype(np.float64) * 0.5 + 0.25).astype(a.dtype)
    index = [slice(None)] * a.ndim
    index[axis] = j
    out[tuple(index)] = src
    return out


def check_batching(ctx):
    spec = ctx.contract.batching  # applicable: layer_conformance.checks.applicable
    axis, contract = spec.axis, ctx.contract
    cases = [c for c in contract.cases if spec.cases is None or c.name in spec.cases]
    state = ctx.test_state()
    layer, state, _ = ctx.layer_at(state)
    fn = ctx.callable(layer)
    details, problems, unused, used = {}, [], {}, []
    for case in cases:
        inputs = ctx.case_inputs(case)
        batched, n = batch_of(inputs, axis)
        if batched is None:
            unused[case.name] = n
            continue
        used.append((case, inputs, batched, n))
    if not used:
        raise NotApplicable(f"no case has inputs that share a batch axis {axis} of two or more examples ("
                            + "; ".join(f"{k!r}: {v}" for k, v in unused.items()) + ")", code="contract_cases")
    if unused:
        details["cases_left_out"] = unused

    def out_of(xs, what):
        try:
            out = ctx.run(layer, xs)
        except Exception as exc:
            raise CheckFailed(f"{what}: the layer raised {unexpected_error(exc)}") from exc
        return ctx.output_numpy(out, f"the output {what}")

    for case, inputs, batched, n in used:
        name = case.name
        full = out_of(inputs, f"on case {name!r}")
        rtol, atol = ctx.tolerance("batching", str(full.dtype))
        if case is used[0][0]:  # a layer that is not a function of its inputs makes every comparison below moot
            diff = describe_mismatch(out_of(inputs, f"on case {name!r} again"), full, rtol, atol,
                                     what=f"case {name!r}: a second identical call against the first")
            if diff:
                raise CheckFailed(diff + ". " + hint("batching_python_state"), **details)
        if full.ndim <= axis or full.shape[axis] != n:
            problems.append(f"case {name!r}: the output's shape {list(full.shape)} has no axis {axis} of {n} "
                            f"examples (the inputs' batch): the layer reduces over the batch; where that is "
                            f"its meaning, say so in the contract (batching: {{not_applicable: why}})")
            continue

        def compare(got, want, what):
            diff = describe_mismatch(got, want, rtol, atol, what=f"case {name!r}: {what}")
            if diff:
                problems.append(diff)
            return diff

        for i in sorted({0, n // 2, n - 1}):
            alone = [_take(a, [i], axis) if b else a for a, b in zip(inputs, batched)]
            got = out_of(alone, f"on example {i} of case {name!r} alone")
            if compare(got, _take(full, [i], axis),
                       f"example {i} run alone (a batch of one) differs from example {i} in the batch of {n}: the "
                       f"layer mixes examples across axis {axis}, or treats a batch of one apart (a squeeze?)"):
                break
        perm = np.roll(np.arange(n), 1)
        got = out_of([_take(a, perm, axis) if b else a for a, b in zip(inputs, batched)],
                     f"on case {name!r} permuted")
        compare(got, _take(full, perm, axis),
                f"the batch permuted along axis {axis} does not give the outputs permuted the same way: the layer "
                f"mixes examples across axis {axis}, or depends on an example's position")
        j, k = 0, n - 1
        changed = [_changed(a, j, k, axis) if b and is_floating(a.dtype) else a for a, b in zip(inputs, batched)]
        got = out_of(changed, f"on case {name!r} with example {j} changed")
        others = [i for i in range(n) if i != j]
        moved = [i for i in others if describe_mismatch(_take(got, [i], axis), _take(full, [i], axis), rtol, atol)]
        if moved:
            problems.append(f"case {name!r}: output of example {moved[0]} changed when example {j} was perturbed "
                            f"({len(moved)} of the other {n - 1} examples moved): the layer mixes examples across "
                            f"axis {axis} (a reduction over the batch axis? a batch statistic?): " + describe_mismatch(
                                _take(got, [moved[0]], axis), _take(full, [moved[0]], axis), rtol, atol,
                                what=f"example {moved[0]}"))
    if problems:
        mixes = any("was perturbed" in p for p in problems)
        raise CheckFailed("; ".join(problems) + (". " + hint("batching_mixes", axis=axis) if mixes else ""), **details)

    case, inputs, batched, n = used[0]
    details["vectorised"] = _vectorised(ctx, spec, layer, fn, case, inputs, batched, n, state)
    return details


def _vectorised(ctx, spec, layer, fn, case, inputs, batched, n, state):
    """The framework's vectorising transform on the first usable case: its output (twice) against the plain
    call's, and for a function with gradients, grad of vmap and vmap of grad against the plain batch's."""
    axis, name, required = spec.axis, case.name, spec.vmap == "required"
    in_axes = [axis if b else None for b in batched]
    full = ctx.output_numpy(ctx.run(layer, inputs), f"the output on case {name!r}")
    rtol, atol = ctx.tolerance("batching", str(full.dtype))
    problems = []
    perm = np.roll(np.arange(n), 1)
    permuted = [_take(a, perm, axis) if b else a for a, b in zip(inputs, batched)]
    outs = []
    # the second call on the batch permuted: a value kept from the first call (a cache, a counter) shows
    for call, xs in (("first", inputs), ("second", permuted)):
        what = "" if call == "first" else " a second time (the first call passed: the layer keeps state " \
                                          "between calls that the transform cannot hold)"
        why = (lambda exc: _value_read(ctx, exc) or (". " + hint("batching_python_state") if call == "second" else ""))
        out, not_run = adapter_part(ctx, "vmap_call", fn, layer, xs, in_axes, axis, required,
                                    failed=lambda exc: f"case {name!r}: the layer under the framework's vectorising "
                                                       f"transform{what} raised {unexpected_error(exc)}{why(exc)}")
        if not_run:
            return str(not_run)
        outs.append(ctx.output_numpy(out, f"the vectorised output on case {name!r}"))
    diff = describe_mismatch(outs[0], full, rtol, atol, what=f"case {name!r}: the vectorised output against the "
                                                             f"plain batch's")
    if diff:
        problems.append(diff + f": the layer computes differently per example under the vectorising transform "
                               f"(a branch on the batch size or a shape, or a mix across axis {axis})")
    else:
        diff = describe_mismatch(outs[1], _take(full, perm, axis), rtol, atol,
                                 what=f"case {name!r}: a second vectorised call, on the batch permuted, against the "
                                      f"plain batch's outputs permuted")
        if diff:
            problems.append(diff + ". " + hint("batching_python_state"))
    said = "outputs agree"
    if not problems and ctx.is_function and ctx.contract.gradients.declared:
        said = _vectorised_gradients(ctx, fn, case, inputs, in_axes, axis, required, problems, full) or said
    if problems:
        raise CheckFailed("; ".join(problems))
    return said


def _vectorised_gradients(ctx, fn, case, inputs, in_axes, axis, required, problems, full):
    name = case.name
    _, wrt, _ = ctx.contract.differentiated(case)
    wrt = [i for i in wrt if in_axes[i] is not None]
    if not wrt:
        return None
    rng = inputs_mod.rng_for(ctx.seed, ctx.contract.name, "batching")
    ct = rng.standard_normal(full.shape).astype(full.dtype)
    plain = ctx.adapter.vjp(fn, None, inputs, wrt, ct).inputs
    got, not_run = adapter_part(ctx, "vmap_vjp", fn, inputs, in_axes, axis, wrt, ct, required,
                                failed=lambda exc: f"case {name!r}: the gradient under the framework's vectorising "
                                                   f"transform raised {unexpected_error(exc)}{_value_read(ctx, exc)}")
    if not_run:
        return f"outputs agree; gradients {not_run}"
    said = []
    for way, short, grads in (("the gradient of the vectorised function", "grad of vmap", got.grad_of_vmap),
                              ("the vectorised gradient", "vmap of grad", got.vmap_of_grad)):
        if isinstance(grads, NotApplicablePart):  # the framework cannot take it this way: n/a, with its reason
            said.append(f"{short} n/a: {grads.reason}")
            continue
        said.append(f"{short} agrees")
        for i in wrt:
            if plain[i] is None and grads[i] is None:
                continue
            # a missing gradient is zero here (``gradients`` says whether one should be missing)
            want = None if plain[i] is None else ctx.output_numpy(plain[i], "the plain gradient")
            g = None if grads[i] is None else ctx.output_numpy(grads[i], f"{way}")
            want = np.zeros_like(g) if want is None else want
            g = np.zeros_like(want) if g is None else g
            rtol, atol = ctx.tolerance("batching", str(want.dtype))
            diff = describe_mismatch(g, want, rtol, atol, what=f"case {name!r}: {way} for input {i} against the "
                                                                 f"plain batch's per-example gradient")
            if diff:
                problems.append(diff + ": the custom gradient rule mixes examples or uses a value it closed over "
                                       "(a batched value captured instead of passed as an argument or residual)")
    return "outputs agree; " + "; ".join(said)
