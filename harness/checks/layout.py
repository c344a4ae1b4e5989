"""Memory layout: ``layout``. Strides do not change the answer (torch).

On every case, the layer is run (evaluation mode) and differentiated with its inputs and the output's gradient
laid out in memory other ways than contiguous: "transposed" (the last two axes stored swapped, as
``x.transpose(-1, -2).contiguous().transpose(-1, -2)`` makes them, for inputs of rank 2 or more), "strided"
(every other element of a larger tensor, a slice with a step), "channels_last" (4-D inputs, where the contract
has them); the outputs and the gradients of the inputs and of the trainable state must equal the contiguous
run's. Not exactly: torch's kernels take another path for other strides (a matmul hands BLAS a transposed
operand, a reduction adds in another order), so the outputs are held to the values tolerance table and the
gradients to the gradients' table, which bound such rounding, while a layer that reads memory in storage order
is off by whole elements. Frameworks whose arrays have no strides the layer can see: n/a. Cost: a few forward
and backward passes per case.
"""
from __future__ import annotations

from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from .base import CheckFailed, unexpected_error
from .mistakes import hint


def _is_view_error(exc) -> bool:
    text = str(exc)
    return "view size is not compatible" in text or ("view" in text and "stride" in text and "reshape" in text)


def check_layout(ctx):
    adapter, contract = ctx.adapter, ctx.contract
    state = ctx.test_state()
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "layout")
    backward = contract.gradients.declared
    problems, said = [], {}
    for case in contract.cases:
        inputs = ctx.case_inputs(case)
        layouts = adapter.layouts(inputs)  # NotApplicable where the framework has no strides
        names, idx, slots = contract.differentiated(case)
        layer, state, _ = ctx.layer_at(state)
        fn = ctx.callable(layer)
        plain = ctx.output_numpy(ctx.run(layer, inputs), f"the output on case {case.name!r}")
        ct = rng.standard_normal(plain.shape) if backward else None
        mapping = ctx.slot_map(layer) if layer is not None else {}
        runs = {}
        for layout in ["contiguous"] + layouts:
            try:
                runs[layout] = adapter.layout_vjp(fn, layer, inputs, idx if backward else [], ct, layout)
            except Exception as exc:
                if layout == "contiguous":
                    raise CheckFailed(f"case {case.name!r}: differentiating on contiguous inputs raised "
                                      f"{unexpected_error(exc)}") from exc
                why = hint("layout_view") if _is_view_error(exc) else \
                    "the layer assumes contiguous memory somewhere; make it work on any strides"
                raise CheckFailed(f"case {case.name!r}: the layer on {layout} inputs and output gradient (same "
                                  f"values, other strides) raised {unexpected_error(exc)}. {why}") from exc
        said[case.name] = layouts
        first = runs["contiguous"]
        want = ctx.output_numpy(first.output, "the contiguous output")
        rtol, atol = ctx.tolerance("values", str(want.dtype))
        for layout in layouts:
            run = runs[layout]
            where = f"case {case.name!r}, {layout} inputs"
            diff = describe_mismatch(ctx.output_numpy(run.output, f"the output on {layout} inputs"), want, rtol, atol,
                                     what=f"{where}: the output against the contiguous inputs'")
            if diff:
                problems.append(diff)
                continue
            if not backward:
                continue
            pairs = [(f"input {names[i]!r}", run.inputs[i], first.inputs[i]) for i in idx]
            pairs += [(f"slot {s!r}", run.state.get(mapping.get(s)), first.state.get(mapping.get(s))) for s in slots]
            for label, got, ref in pairs:
                if got is None and ref is None:
                    continue
                if got is None or ref is None:
                    problems.append(f"{where}: the gradient of {label} is "
                                    f"{'missing' if got is None else 'present'} where the contiguous run's is "
                                    f"{'present' if got is None else 'missing'}")
                    continue
                ref = ctx.output_numpy(ref, "a contiguous gradient")
                grtol, gatol = ctx.tolerance("gradients", str(ref.dtype))
                diff = describe_mismatch(ctx.output_numpy(got, "a gradient"), ref, grtol, gatol,
                                         what=f"{where} and output gradient: the gradient of {label} against "
                                              f"the contiguous run's")
                if diff:
                    problems.append(diff)
                    break
    if problems:
        raise CheckFailed("; ".join(problems) + ". " + hint("layout_storage_order"))
    return {"layouts": said}
