"""Where a numeric failure in a dtype comes from: the precision the layer computes at.

When a per-dtype check (``values``, ``native``, ``gradients``, ``properties``, ``forward_mode``,
``second_order``, ``modes``) fails in a dtype other than the cases' own, the runner asks ``attribute``
to measure the cause, once, whichever check failed, and adds it to the failure's message and details.
The measurement is the layer's forward on the target's own cases and state, through its executor:

* 16-bit (or float32) outputs: the same layer built and run one dtype wider on the same inputs and
  state (exact there) and rounded back. Within tolerance of the reference where the narrow run is
  not, the layer computes in the narrow arithmetic (hint ``computes_narrow``; a 16-bit accumulation
  of a contract's ``accumulate`` statistic is one such case, said as well where its variant matches).
* float64 outputs: an error relative to the output's scale near float32's epsilon, far above
  float64's, says that the layer computes float64 inputs in float32 (hint ``computes_float32``).
* otherwise the error in ulps of the dtype, with the contract's native layer, where it names one,
  measured the same way as a yardstick (hint ``precision_unexplained``).

Every cause names the knob that narrows a layer's claim: a binding's ``dtypes:`` or ``--dtype``.
It costs a few forward calls, and runs only where a check has failed.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..compare import describe_mismatch, relative_error
from ..dtypes import HALF, is_floating, np_dtype
from ..tolerances import finfo, spacing
from .common import call_native, native_layer, reference_forward, set_native_state
from .mistakes import accumulated_low, hint

WIDER = {"float16": "float32", "bfloat16": "float32", "float32": "float64"}
# a float64 output whose error relative to its scale lies in this band of float32's epsilon computes
# in float32: float32 arithmetic errs by a few eps per step, float64 arithmetic ~1e9 times less
FLOAT32_BAND = (1 / 16, 256)
# the median element of a narrow run lies within this many ulps of the wide run rounded back, where the
# difference is the narrow arithmetic's rounding
ROUNDING_ULPS = 4


def _cast_all(arrays, dtype: str):
    return [np.asarray(a).astype(np_dtype(dtype)) if is_floating(a) else a for a in arrays]


def _outputs(ctx, inputs_per_case, state, dtype: str | None = None):
    """The layer's outputs on each case's inputs at ``state``; ``dtype``: built and run in that dtype
    instead of ``ctx``'s (inputs and state cast to it first). Also the state the reference is to see
    (``CheckContext.layer_at``)."""
    run = ctx if dtype is None else replace(ctx, dtype=dtype)
    if dtype is not None:
        state = dict(zip(state, _cast_all(state.values(), dtype)))
        inputs_per_case = [_cast_all(inputs, dtype) for inputs in inputs_per_case]
    layer, held, _ = run.layer_at(state)
    return [run.adapter.numpy(run.run(layer, inputs)) for inputs in inputs_per_case], held


def _native_outputs(ctx, inputs_per_case, state):
    """The contract's native layer for this framework at ``state``, in ``ctx``'s dtype; None where none."""
    spec = ctx.contract.native.get(ctx.adapter.name)
    if spec is None or spec.class_path is None:
        return None, None
    native = native_layer(ctx, spec)
    set_native_state(ctx, native, spec, state)
    # inputs_per_case holds every case's, in the contract's order (measure)
    return spec.class_path, [ctx.adapter.numpy(call_native(ctx, native, spec, case, inputs))
                             for case, inputs in zip(ctx.contract.cases, inputs_per_case)]


def _ulps(outputs, expected, dtype: str) -> float:
    """The largest error in ulps of ``dtype`` at the expected values."""
    worst = 0.0
    for got, want in zip(outputs, expected):
        g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        finite = np.isfinite(g) & np.isfinite(w)
        if np.any(~finite & ~((g == w) | (np.isnan(g) & np.isnan(w)))):
            return float("inf")
        if np.any(finite):
            worst = max(worst, float(np.max(np.abs(g[finite] - w[finite]) / spacing(w[finite], dtype))))
    return worst


def _typical_ulps(narrow, wide, dtype: str) -> float:
    """The median element's distance, in ulps of ``dtype``, between the narrow outputs and the wide ones
    rounded to ``dtype``."""
    d = []
    for n, w in zip(narrow, wide):
        n = np.asarray(n, dtype=np.float64).ravel()
        w = np.asarray(np.asarray(w).astype(np_dtype(dtype)), dtype=np.float64).ravel()
        finite = np.isfinite(n) & np.isfinite(w)
        d.append(np.where(finite, np.abs(n - w) / spacing(np.where(finite, w, 0.0), dtype), np.inf))
    d = np.concatenate(d) if d else np.zeros(0)
    return float(np.median(d)) if d.size else 0.0


def _within(ctx, outputs, expected, dtype: str) -> bool:
    rtol, atol = ctx.tolerance("values", dtype)
    return not any(describe_mismatch(np.asarray(g).astype(np_dtype(dtype)), w, rtol, atol,
                                     ulps=ctx.ulps("values", dtype))
                   for g, w in zip(outputs, expected))


def _ulps_text(n: float) -> str:
    return "not finite" if not np.isfinite(n) else f"{n:.3g} ulp{'s' if n != 1 else ''}"


def measure(ctx) -> tuple[str, dict] | None:
    """(the cause, its measurements) of a numeric failure in ``ctx``'s dtype, or None where the
    layer's forward does not show one (its outputs are not of that dtype, or the forward is right
    and computes at that dtype's precision)."""
    state = ctx.test_state()
    inputs_per_case = [ctx.case_inputs(case) for case in ctx.contract.cases]
    if not inputs_per_case:
        return None
    got, state_held = _outputs(ctx, inputs_per_case, state)
    dtype = ctx.expected_dtype(inputs_per_case[0])
    if any(str(g.dtype) != dtype for g in got):
        return None     # a dtype mistake, which the values check names
    expected = [reference_forward(ctx, inputs, state_held) for inputs in inputs_per_case]
    fw = ctx.adapter.name
    details = {"dtype": dtype, "error_ulps": _ulps(got, expected, dtype)}
    narrow_ok = _within(ctx, got, expected, dtype)
    wide = WIDER.get(dtype)
    if wide is not None and not narrow_ok:
        wide_out = _outputs(ctx, inputs_per_case, state, wide)[0]
        wide_ok = _within(ctx, wide_out, expected, dtype)
        # narrow arithmetic rounds: most elements stay within a few ulps of the wide run's, and only some
        # (a sum, a statistic near eps) drift. A layer that does something else in this dtype (scales its
        # output, takes another branch) moves the typical element too: no precision cause for it.
        typical = _typical_ulps(got, wide_out, dtype)
        details.update(wider=wide, wider_within_tolerance=wide_ok, typical_ulps_from_wider=typical)
        if wide_ok and typical <= ROUNDING_ULPS:
            # inf where the wide run, rounded back, is finite: an intermediate overflows (mistakes.computes_narrow_overflow)
            overflow = any(np.any(np.isinf(np.asarray(g, dtype=np.float64))
                                  & np.isfinite(np.asarray(np.asarray(w).astype(np_dtype(dtype)), dtype=np.float64)))
                           for g, w in zip(got, wide_out))
            said = hint("computes_narrow_overflow" if overflow else "computes_narrow", fw, dtype=dtype, wide=wide)
            outputs = list(zip(inputs_per_case, got))
            accumulation = accumulated_low(ctx, state_held, outputs) if dtype in HALF else ""
            return said + (f" {accumulation}" if accumulation else ""), {**details, "cause": "computes_narrow"}
    if dtype == "float64":
        rel = max(relative_error(g, w) for g, w in zip(got, expected))
        eps32 = float(finfo("float32").eps)
        details.update(relative_error=rel)
        if FLOAT32_BAND[0] * eps32 <= rel <= FLOAT32_BAND[1] * eps32:
            return (f"The layer computes float64 inputs at float32 precision (error {rel:.2g}, float32's epsilon "
                    f"is {eps32:.2g}): {hint('computes_float32', fw)}"), {**details, "cause": "computes_float32"}
    if narrow_ok:
        return None     # the forward is right in this dtype: its precision does not explain the failure
    if dtype in HALF:   # a 16-bit sum that the wider run repeats (the layer accumulates in 16 bits whatever its input)
        accumulation = accumulated_low(ctx, state_held, list(zip(inputs_per_case, got)))
        if accumulation:
            return accumulation, {**details, "cause": "accumulated_16bit"}
    yardstick = ""
    try:
        name, native = _native_outputs(ctx, inputs_per_case, state_held)
    except Exception:   # a native layer that cannot be built here is the native check's to report
        name, native = None, None
    if native is not None and all(str(n.dtype) == dtype for n in native):
        details.update(native=name, native_ulps=_ulps(native, expected, dtype))
        yardstick = f"; {name} is within {_ulps_text(details['native_ulps'])} here"
    why = (f"the same layer in {wide}, rounded to {dtype}, is not within tolerance either" if wide else
           f"its error relative to the output's scale, {details['relative_error']:.2g}, is not float32's either")
    return (f"The layer's error is up to {_ulps_text(details['error_ulps'])} of {dtype}{yardstick}; {why}, so "
            f"{dtype} rounding alone does not explain it. {hint('precision_unexplained', fw, dtype=dtype)}"), \
        {**details, "cause": "precision_unexplained"}


def attribute(ctx, failure) -> None:
    """Add the measured cause to ``failure`` (a CheckFailed in a dtype other than the cases' own)."""
    if ctx.dtype is None:
        return
    try:
        found = measure(ctx)
    except Exception as exc:  # the layer fails some other way too: its own checks say how
        failure.details["precision"] = {"not_measured": f"{type(exc).__name__}: {exc}"[:300]}
        return
    if found is None:
        return
    said, details = found
    failure.message = f"{failure.message.rstrip('.')}. {said}"
    failure.args = (failure.message,)
    failure.details["precision"] = details
