"""The layer under the framework's mixed-precision mechanism: ``mixed_precision``.

Users train in 16 bits with float32 master weights: Keras ``mixed_float16``/``mixed_bfloat16`` dtype
policies, torch ``autocast``, flax NNX's ``param_dtype`` vs ``dtype``, MXNet's AMP. Each framework's
adapter names its mechanisms (``mixed_precision_policies``) and runs the layer under one
(``mixed_precision_run``); this check judges what comes back, the same way for every framework:
- every floating variable keeps the variable dtype the mechanism promises (float32), also after a
  call and a backward pass (a layer that creates or stores its weights in the compute dtype fails);
- where the mechanism fixes it, the layer states the compute dtype and its output has it;
- the output agrees with the same layer's float32 run (same state, first case) to a 16-bit tolerance;
- the gradient of every float32 variable and input is float32.
The first case alone is run: what a layer's statistics lose in 16 bits on extreme rows is a question
of accumulation precision, not of the mechanism.
"""
from __future__ import annotations

import numpy as np

from ..compare import describe_mismatch
from ..state_map import variable_value
from .base import CheckFailed, CheckSkipped, unexpected_error
from ..protocol.precision import MixedPrecisionPolicy, MixedPrecisionRun
from .mistakes import Findings, hint

# (rtol, atol) of a 16-bit computation against the float32 run: 8 units in the last place (eps: 2**-10
# for float16, 2**-7 for bfloat16); atol is relative to the output's root mean square, since a 16-bit
# input rounding error survives cancellation (x - mean(x)) at the input's scale, not the output's.
# A contract overrides either with ``tolerances: checks: mixed_precision: {float16: {rtol, atol}}``
# (atol then absolute).
MIXED_TOLERANCES = {"float16": (8 * 2.0 ** -10, 8 * 2.0 ** -10), "bfloat16": (8 * 2.0 ** -7, 8 * 2.0 ** -7)}


def _tolerance(ctx, compute: str, ref: np.ndarray) -> tuple[float, float]:
    declared = ctx.contract.tolerances.checks.get("mixed_precision", {}).get(compute)
    if declared is not None:
        return float(declared.rtol), float(declared.atol)
    rtol, atol = MIXED_TOLERANCES.get(compute, ctx.tolerance("mixed_precision", compute))
    finite = np.abs(ref[np.isfinite(ref)]) if ref.size else ref
    scale = float(np.sqrt(np.mean(finite ** 2))) if finite.size else 1.0
    return rtol, atol * max(scale, 1e-3)


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))


def check_mixed_precision(ctx):
    from .. import inputs as inputs_mod
    adapter, contract = ctx.adapter, ctx.contract
    fw = adapter.name
    policies = adapter.mixed_precision_policies(ctx.impl, ctx.is_function)  # raises NotApplicable (n/a) where there is none
    details: dict = {"policies": {}}
    runnable = [p for p in policies if p.not_applicable is None]
    for p in policies:
        if p.not_applicable is not None:
            details["policies"][p.policy] = str(p.not_applicable)
    if not runnable:
        from ..record import NotApplicable
        raise NotApplicable("; ".join(f"{p.policy}: {p.not_applicable.reason}" for p in policies), code="parts")

    case = contract.cases[0]
    inputs = ctx.case_inputs(case)
    names = list(case.inputs)
    _, idx, _ = contract.differentiated(case)
    differentiate = contract.gradients.declared
    wrt = list(idx) if differentiate else []
    state = ctx.test_state()

    # the float32 run: the same layer, the same state, no policy
    layer, held, _ = ctx.layer_at(state)
    want = ctx.output_numpy(ctx.run(layer, inputs))
    mapping = ctx.slot_map(layer) if layer is not None else {}
    assign = {str(mapping[s]): variable_value(mapping[s], np.asarray(v)) for s, v in held.items() if s in mapping}
    declared = {str(mapping[s]): slot.dtype for s, slot in {**contract.trainable, **contract.non_trainable}.items()
                if s in mapping}
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "mixed_precision")
    cotangent = rng.standard_normal(want.shape) if wrt or (differentiate and layer is not None) else None
    if cotangent is not None and np.iscomplexobj(want):
        cotangent = None  # no real cotangent for a complex output: dtypes of the forward only

    problems = Findings()  # each hint once, however many policies show the mistake
    for policy in runnable:
        name = policy.policy
        try:
            if policy.isolated:
                # the mechanism changes its process for good (MXNet's amp.init): a process of its own
                if ctx.impl_spec is None:
                    details["policies"][name] = "not run: the implementation has no module:attr for a fresh process"
                    continue
                with ctx.fresh_adapter() as fresh:
                    got = fresh.mixed_precision_run(ctx.impl_spec, ctx.constructor_args() if layer is not None
                                                    else None, inputs, name, assign, cotangent, wrt)
            else:
                got = adapter.mixed_precision_run(ctx.impl, ctx.constructor_args() if layer is not None else None,
                                                  inputs, name, assign, cotangent, wrt)
        except (CheckSkipped, CheckFailed):
            raise
        except Exception as exc:
            from ..record import NotApplicable
            if isinstance(exc, NotApplicable):
                details["policies"][name] = f"n/a: {exc}"
                continue
            problems.append(f"under {name}: the layer raises {unexpected_error(exc)}")
            continue
        found = _judge(ctx, policy, got, want, declared, names, problems)
        details["policies"][name] = {"mechanism": got.mechanism, "output_dtype": got.output_dtype,
                                     "variables": got.variables, "gradients": got.gradients,
                                     **({"notes": list(got.notes)} if got.notes else {})}
        problems += [f"under {name}: {f}" for f in found]
    if problems:
        raise CheckFailed(problems.text(), **details)
    if not any(isinstance(v, dict) for v in details["policies"].values()):
        from ..record import NotApplicable
        raise NotApplicable("; ".join(f"{k}: {v}" for k, v in details["policies"].items()), code="parts")
    return details


def _judge(ctx, policy: MixedPrecisionPolicy, got: MixedPrecisionRun, want, declared, names,
           hints: Findings) -> list[str]:
    """What is wrong under one policy; the hints go to ``hints``, to be said once."""
    fw = ctx.adapter.name
    found: list[str] = []
    keep, compute = policy.variables, policy.compute
    low = [f"{n!r} is {d}" for n, d in got.variables.items()
           if _floating(d) and d != declared.get(n, keep) and declared.get(n, keep) == keep]
    if low:
        found.append(f"variable(s) {', '.join(low)}, not {keep}: the layer creates or stores its weights in "
                     f"the compute dtype, so the optimizer updates 16-bit weights")
        hints.say(hint('mixed_variables_low', fw))
    said = got.compute_dtype
    if policy.states_compute and said is not None and said != compute:
        found.append(f"the layer's compute dtype is {said}, not {compute}: it did not take the policy "
                     f"(its output is {got.output_dtype})")
        hints.say(hint('mixed_policy_ignored', fw))
    out_dtype = got.output_dtype
    real = np.issubdtype(want.dtype, np.floating)  # a policy fixes floating outputs (complex, ints keep theirs)
    if policy.output and real and out_dtype != policy.output and not (said is not None and said != compute):
        found.append(f"the output is {out_dtype}, not the compute dtype {policy.output}")
    out = np.asarray(got.output)
    if out.shape != want.shape:
        found.append(f"the output has shape {list(out.shape)}, {list(want.shape)} in float32")
    else:
        rtol, atol = _tolerance(ctx, compute, np.abs(want.astype(np.complex128)).astype(np.float64))
        diff = describe_mismatch(out.astype(want.dtype) if not np.iscomplexobj(want) else out, want, rtol, atol,
                                 what=f"output vs the float32 run ({compute} tolerance)")
        if diff:
            found.append(diff)
    for n, d in got.gradients.items():
        var = got.variables.get(n)
        if d is not None and var is not None and _floating(var) and d != var:
            found.append(f"the gradient of variable {n!r} is {d}, the variable {var}")
    for i, d in enumerate(got.input_gradients):
        if d is not None and d != got.input_dtypes[i]:
            what = names[i] if i < len(names) else str(i)
            found.append(f"the gradient for input {what!r} is {d}, the input {got.input_dtypes[i]}")
    return found
