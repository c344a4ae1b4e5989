"""Custom-gradient functions: comparison with a native function (values and gradients, with the
native convention recorded where the contract expects the two to differ), and the probe that
non-differentiable inputs get no cotangent. Called from ``native`` and ``gradients``."""
from __future__ import annotations

import numpy as np

from ..compare import describe_mismatch, dtype_problem, max_abs_error
from .base import CheckFailed, unexpected_error
from .common import import_native


def _floating(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def _as_numpy(ctx, g):
    return None if g is None else (g if isinstance(g, np.ndarray) else ctx.adapter.numpy(g))


def native_dtype_problem(got, want, inputs, what) -> str | None:
    """Our output's dtype against the native one's, said as ``values`` says it (``dtype_problem``); None where
    they agree, or where the shapes differ (the comparison says that)."""
    if np.shape(got) != np.shape(want):
        return None
    given = next((str(a.dtype) for a in inputs if _floating(str(getattr(a, "dtype", "")))), None)
    return dtype_problem(str(got.dtype), str(want.dtype), f"{what}: output", given)


def check_native_function(ctx, spec):
    """Our function against the framework's own (``native: {fw: {function: module.fn}}``), both
    called with the case's inputs in order. Values must agree on every case; gradients (cotangent
    ones, so they read as per-element factors) must agree on ``native_gradients.agree`` cases and
    are recorded, not judged, on ``native_gradients.record`` cases: that is where the contract
    chose a convention the framework need not share."""
    contract, adapter = ctx.contract, ctx.adapter
    native = import_native(ctx, spec.function)
    label = spec.function
    agree, record = contract.native_gradients
    with_grads = contract.gradients.declared
    problems, conventions, worst = [], {}, 0.0
    for case in contract.cases:
        inputs = ctx.case_inputs(case)
        ours = ctx.callable(None)
        got = ctx.output_numpy(ctx.run(None, inputs), f"case {case.name!r}: the output")
        want = adapter.numpy(adapter.call(native, inputs))
        bad_dtype = native_dtype_problem(got, want, inputs, f"case {case.name!r} vs native {label}")
        if bad_dtype:
            problems.append(bad_dtype)
            continue
        rtol, atol = ctx.tolerance("native", str(want.dtype))
        diff = describe_mismatch(got, want, rtol, atol, what=f"case {case.name!r} vs native {label}")
        if diff:
            problems.append(diff)
            continue
        worst = max(worst, max_abs_error(got, want))
        if not with_grads or case.name not in agree | record:
            continue
        case_names, idx, _ = contract.differentiated(case)
        ones = np.ones(want.shape)
        try:
            g_ours = adapter.vjp(ours, None, inputs, idx, ones).inputs
        except Exception as exc:
            raise CheckFailed(f"case {case.name!r}: differentiating raised {unexpected_error(exc)}") from exc
        g_native = adapter.vjp(native, None, inputs, idx, ones).inputs
        for i in idx:
            a, b = _as_numpy(ctx, g_ours[i]), _as_numpy(ctx, g_native[i])
            a = np.zeros(inputs[i].shape) if a is None else a
            b = np.zeros(inputs[i].shape) if b is None else b
            if case.name in record:
                differs = np.argwhere(a != b)
                conventions[f"{case.name}/{case_names[i]}"] = {
                    "inputs": inputs[i].tolist(), "gradient": a.tolist(), "native_gradient": b.tolist(),
                    "differs_at": [list(map(int, p)) for p in differs[:20]],
                    "summary": (f"native {label} gives gradient {np.unique(b[tuple(differs.T)]).tolist()} where "
                                f"ours gives {np.unique(a[tuple(differs.T)]).tolist()} at {len(differs)} of "
                                f"{a.size} entries" if len(differs) else f"native {label} agrees on every entry"),
                }
                continue
            rtol, atol = ctx.tolerance("native", str(b.dtype))
            diff = describe_mismatch(a, b, rtol, atol,
                                     what=f"case {case.name!r}: gradient for {case_names[i]!r} vs native {label}")
            if diff:
                problems.append(diff)
    if problems:
        raise CheckFailed("; ".join(problems), max_abs_error=worst)
    details = {"max_abs_error": worst}
    if conventions:
        details["native_convention"] = conventions
    return details


def nondiff_probe(ctx, case, layer, inputs, cotangent, notes: list) -> list[str]:
    """Inputs declared ``differentiable: false`` must get no cotangent: asked for one anyway, the
    framework returns None or zeros (a custom rule returns None for them, JAX's nondiff_argnums
    route them past the machinery). A refusal to differentiate is that promise too: noted."""
    specs = list(case.inputs.items())
    probe = [i for i, (_, s) in enumerate(specs) if not s.differentiable and s.floating]
    if not probe:
        return []
    labels = ", ".join(repr(specs[i][0]) for i in probe)
    # the differentiable inputs want gradients too, as in training: MXNet 1.9.1's Function
    # writes no input gradient after the first input that wants none, which would hide the probe's
    wanted = sorted(set(probe) | {i for i, (_, s) in enumerate(specs)
                                  if s.differentiable and s.floating})
    try:
        grads = ctx.adapter.vjp(ctx.callable(layer), layer, inputs, wanted, cotangent).inputs
    except Exception as exc:
        notes.append(f"case {case.name!r}: asked for a gradient w.r.t. non-differentiable {labels}, the "
                     f"framework refused ({unexpected_error(exc)}), so it gets no cotangent")
        return []
    problems = []
    for i in probe:
        g = _as_numpy(ctx, grads[i])
        if g is not None and np.any(g != 0):
            problems.append(f"non-differentiable input {specs[i][0]!r} (case {case.name!r}) received a "
                            f"cotangent (max |g| = {float(np.max(np.abs(g))):.4g}): the backward rule must "
                            f"return None (no cotangent) for it")
    return problems
