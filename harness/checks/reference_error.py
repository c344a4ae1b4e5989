"""The reference's own error in a dtype below float64, for ``values`` and ``gradients``
(``layer_conformance.tolerances.reference_error_factor`` decides where it applies).

A comparison is made at the table's bound first; only where that fails, and the contract states no tolerance for
the check and dtype, is the reference run a second time in the dtype (in the reference executor:
``layerside/rounding.py`` says how) and the comparison repeated with k times the reference's own largest error
allowed on every element. A failure then gives both errors and k; a pass by the rule is noted in the record.
"""
from __future__ import annotations

import numpy as np

from ..compare import OwnError, describe_mismatch, max_abs_error
from ..dtypes import is_floating
from ..reference_run import reference
from ..tolerances import reference_error_factor


def _in_dtype(ctx, function: str, dtype: str, args: list, state: dict) -> tuple:
    from ..boundary.remote import reference_in_dtype
    module, _, _ = reference(ctx.contract)
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) and is_floating(a.dtype) else a
            for a in args]
    return reference_in_dtype(module, function, dtype, args, {**ctx.contract.constructor, **state},
                              accumulate=ctx.contract.accumulate)


def forward_in(ctx, inputs, state):
    """The reference's forward on ``inputs`` at ``state``, run in a dtype: dtype -> (output as float64, method)."""
    def run(dtype):
        result, method = _in_dtype(ctx, ctx.contract.reference.forward, dtype, list(inputs), state)
        return np.asarray(result, dtype=np.float64), method
    return run


def vjp_in(ctx, cotangent, inputs, state):
    """The reference VJP of ``cotangent`` run in a dtype: (dtype, name) -> (that gradient as float64, method)."""
    def run(dtype, name):
        result, method = _in_dtype(ctx, ctx.contract.reference.vjp, dtype, [cotangent, *inputs], state)
        return np.asarray(result[name], dtype=np.float64), method
    return run


class Judge:
    """One check's comparisons against the float64 reference: the table's bound, and where it fails and the rule
    applies, k times the reference's own error in the dtype. ``notes``: the comparisons that passed by the rule."""

    def __init__(self, ctx, check: str):
        self.ctx, self.check, self.notes = ctx, check, []

    def mismatch(self, got, expected, dtype: str, what: str, own_run=None) -> str | None:
        """None where ``got`` is close to ``expected``; else the message. ``own_run()``: the reference's value in
        ``dtype`` and how it ran (asked only where the table's bound fails and the rule applies)."""
        ctx = self.ctx
        rtol, atol = ctx.tolerance(self.check, dtype)
        ulps = ctx.ulps(self.check, dtype)
        diff = describe_mismatch(got, expected, rtol, atol, what=what, ulps=ulps)
        k = reference_error_factor(ctx.contract, self.check, dtype)
        if diff is None or k is None or own_run is None or np.shape(got) != np.shape(expected) \
                or not _numpy_reference(ctx.contract):
            return diff
        try:
            own_value, method = own_run()
        except Exception as exc:  # a reference that cannot run in the dtype: the table alone judges
            return f"{diff}; the reference could not run in {dtype} to measure its own error: {_said(exc)}"
        finite = np.abs(np.asarray(expected, dtype=np.float64)[np.isfinite(expected)])
        own = OwnError(k, dtype, max_abs_error(own_value, expected), method, float(finite.max(initial=0.0)))
        diff = describe_mismatch(got, expected, rtol, atol, what=what, ulps=ulps, own=own)
        if diff is None:
            error = max_abs_error(got, expected)
            self.notes.append(f"{what}: outside the {dtype} table (rtol={rtol:g}, atol={atol:g}), within "
                              f"{k:g}x the reference's own {dtype} error: max error {error:.3g} is "
                              f"{error / own.error:.3g}x the reference's {own.error:.3g} (method: {method})")
        return diff


def _said(exc) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def _numpy_reference(contract) -> bool:
    """Whether the contract's reference is a numpy module (the one kind that runs in a dtype here)."""
    ref = contract.reference
    return bool(getattr(ref, "module", None)) and not getattr(ref, "impl", None)
