"""Comparison tolerances per dtype: one table for values, one for gradients, and an allowance in ulps
for 16-bit outputs. A contract's ``tolerances`` overrides any entry (``default``, or per check).

Values (every check that compares outputs): ``torch.testing.assert_close``'s defaults, (rtol, atol)
per dtype (torch/testing/_comparison.py, ``_DTYPE_PRECISIONS``).

Gradients (``gradients``, ``second_order``, ``forward_mode``): in 16 bits, JAX's gradient tolerances
(jax/_src/public_test_util.py, ``_default_grad_tolerance``: bfloat16 1e-1, float16 1e-2), which JAX
uses as both rtol and atol. float32 and float64 keep assert_close's values: JAX's looser float32
gradient tolerance (2e-3) is for finite differences taken in float32, while this harness compares
with the reference's float64 VJP, which float32 meets far more closely (a contract loosens it where
a layer needs that, as rmsnorm does).

The reference's own error (``reference_error_factor``): where the contract states no entry for ``values`` or
``gradients`` in a dtype below float64, a result outside the table's bound still passes when its largest absolute
error against the float64 reference is at most k times the largest error of the reference itself run in that
dtype (k: the contract's ``tolerances.reference_error_factor``, default 2, as FlashAttention's tests compare
with the reference computed in the low dtype). The table stays the floor. How the reference runs in a dtype:
``layer_conformance.checks.reference_error``.

ULPs: a 16-bit output rounds the exact result once (half an ulp) and each 16-bit step before it
again, so close to a power of two a relative tolerance alone can fail a correct layer by a fraction
of an ulp. A 16-bit comparison therefore also allows ``ULPS`` units in the last place of the output
dtype at the expected value (``ml_dtypes.finfo`` for bfloat16): whichever bound is larger applies.
"""
from __future__ import annotations

import numpy as np

from .check_catalog import GRADIENT_TOLERANCE_CHECKS, REFERENCE_ERROR_CHECKS
from .dtypes import HALF, np_dtype

VALUES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
GRADIENTS = {**VALUES, "bfloat16": (1e-1, 1e-1), "float16": (1e-2, 1e-2)}
GRADIENT_CHECKS = GRADIENT_TOLERANCE_CHECKS  # the checks judged by GRADIENTS (declared with each check)
# 16-bit outputs: the rounding of the result plus up to three 16-bit steps before it (a norm's
# statistic, its reciprocal square root, the scale), each within half an ulp
ULPS = {"float16": 2.0, "bfloat16": 2.0}


def default(check: str, dtype: str) -> tuple[float, float]:
    return (GRADIENTS if check in GRADIENT_CHECKS else VALUES).get(dtype, (0.0, 0.0))


def _entry(contract, check: str, dtype: str):
    """The contract's ``Tolerance`` for ``check`` on ``dtype``, or None."""
    return contract.tolerances.declared(check, dtype) if contract is not None else None


def tolerance(contract, check: str, dtype: str) -> tuple[float, float]:
    """(rtol, atol) for ``check`` on outputs of ``dtype``: the contract's entry, else the table's."""
    entry = _entry(contract, check, dtype)
    if entry is not None:
        return float(entry.rtol), float(entry.atol)
    return default(check, dtype)


# the dtypes in which the reference's own error may loosen a check (REFERENCE_ERROR_CHECKS: declared with each)
REFERENCE_ERROR_DTYPES = ("float32", "bfloat16", "float16")


def reference_error_factor(contract, check: str, dtype: str) -> float | None:
    """k where ``check`` on ``dtype`` is judged also against the reference's own error in ``dtype`` (k times it,
    the table's bound the floor); None where it is not: the contract states a tolerance for it, the check or
    dtype is not one the rule covers, or the contract's factor is 0."""
    if check not in REFERENCE_ERROR_CHECKS or dtype not in REFERENCE_ERROR_DTYPES or contract is None:
        return None
    if _entry(contract, check, dtype) is not None:
        return None
    k = float(contract.tolerances.reference_error_factor)
    return k if k > 0 else None


def ulps(contract, check: str, dtype: str) -> float:
    """The allowance in ulps of ``dtype`` (16-bit dtypes only; 0 elsewhere)."""
    entry = _entry(contract, check, dtype)
    if entry is not None and entry.ulps is not None:
        return float(entry.ulps)
    return ULPS.get(dtype, 0.0)


def spacing(expected, dtype: str) -> np.ndarray:
    """One ulp of ``dtype`` at each expected value (the gap to the next representable number)."""
    info = finfo(dtype)
    e = np.abs(np.asarray(expected, dtype=np.float64))
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(e > 0, e, 1.0)))
    return np.maximum(np.exp2(exponent) * float(info.eps), float(info.smallest_subnormal))


def finfo(dtype: str):
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.finfo(np_dtype(dtype))
    return np.finfo(np.dtype(dtype))


def ulps_for(actual) -> tuple[float, str | None]:
    """The default allowance for an output array: (ulps, its dtype name), or (0, None) above 16 bits."""
    name = np.asarray(actual).dtype.name
    return (ULPS[name], name) if name in HALF and name in ULPS else (0.0, None)
