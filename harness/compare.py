"""Numeric comparison with assert_close-style diagnostics."""
from __future__ import annotations

import numpy as np

from .tolerances import VALUES as DEFAULT_TOLERANCES, tolerance  # noqa: F401  (the one owner of the tables)


_WIDTH = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def _moved(got: str, want: str) -> str:
    """'promotes', 'demotes' or 'converts' (between floating dtypes), else ''."""
    if got not in _WIDTH or want not in _WIDTH:
        return ""
    return "promotes" if _WIDTH[got] > _WIDTH[want] else "demotes" if _WIDTH[got] < _WIDTH[want] else "converts"


def dtype_problem(got: str, expected: str, what: str, given: str | None = None) -> str | None:
    """None where the dtypes are the same; else '<what>: dtype <got>, expected <expected>', saying what the
    layer did to its inputs' dtype (promoted, demoted or converted it). ``values`` and ``native`` say it so."""
    got, expected = str(got), str(expected)
    if got == expected:
        return None
    moved = _moved(got, expected)
    return (f"{what}: dtype {got}, expected {expected}"
            + (f" (the output is {got} for {given or expected} inputs: the layer {moved} it)" if moved else ""))


def describe_mismatch(actual, expected, rtol, atol, what="values", ulps=None, own=None) -> str | None:
    """None when close; else a message with count, largest error, where, and the tolerance.

    A 16-bit ``actual`` is also allowed ``ulps`` units in the last place of its dtype (default: the
    table's, ``layer_conformance.tolerances.ULPS``); whichever bound is larger applies. ``own``: the
    reference's own error in the dtype (``OwnError``), of which every element is also allowed k times."""
    from .tolerances import spacing, ulps_for
    actual = np.asarray(actual)
    n_ulps, half = ulps_for(actual)
    if ulps is not None and half:
        n_ulps = float(ulps)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        return f"{what}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    a = actual.astype(np.complex128 if np.iscomplexobj(actual) or np.iscomplexobj(expected) else np.float64)
    e = expected.astype(a.dtype)
    nonfinite = ~np.isfinite(a) & np.isfinite(e)
    if nonfinite.any():
        n_nan = int(np.isnan(a[nonfinite]).sum())
        first = tuple(int(i) for i in np.argwhere(nonfinite)[0])
        return (f"{what}: {int(nonfinite.sum())} / {a.size} elements are not finite where the reference is "
                f"({n_nan} NaN, {int(nonfinite.sum()) - n_nan} Inf), first at index {first}")
    same_special = (a == e) | (np.isnan(a) & np.isnan(e))
    with np.errstate(invalid="ignore"):
        err = np.where(same_special, 0.0, np.abs(a - e))
    bound = atol + rtol * np.abs(e)
    if half and n_ulps:
        bound = np.maximum(bound, n_ulps * spacing(e, half))
    if own is not None:
        bound = np.maximum(bound, own.allowed)
    bad = ~(err <= np.where(np.isfinite(bound), bound, np.inf))
    if not bad.any():
        return None
    err_bad = np.where(bad, err, -1.0)
    idx = np.unravel_index(int(np.argmax(np.nan_to_num(err_bad, nan=np.inf))), a.shape)
    idx_t = tuple(int(i) for i in idx)
    rel = err[idx] / abs(e[idx]) if e[idx] != 0 else float("inf")
    return (f"{what}: mismatched elements {int(bad.sum())} / {a.size}; greatest absolute difference "
            f"{float(err[idx]):.3g} at index {idx_t} (got {a[idx]:.7g}, expected {e[idx]:.7g}, "
            f"relative {float(rel):.3g}); allowed rtol={rtol:g}, atol={atol:g}"
            + (f" or {n_ulps:g} ulps of {half}" if half and n_ulps else "")
            + (f"; {own.said(max_abs_error(a, e))}" if own is not None else ""))


class OwnError:
    """The reference's own error in a dtype below float64 (its largest absolute error there against its float64
    run), the factor k a layer may make of it, and how the reference ran in the dtype. ``scale``: the float64
    reference's largest magnitude; a run that errs by more than ``LOST`` of it lost the result (an overflow, a
    cancellation to nothing) and is no yardstick: it allows nothing beyond the table."""
    LOST = 1 / 8

    def __init__(self, factor: float, dtype: str, error: float, method: str, scale: float = float("inf")):
        self.factor, self.dtype, self.error, self.method = float(factor), dtype, float(error), method
        self.scale = float(scale)

    @property
    def lost(self) -> bool:
        return not np.isfinite(self.error) or self.error > self.LOST * self.scale

    @property
    def allowed(self) -> float:
        """The absolute error every element may have (0 where the reference's own run is no yardstick)."""
        return 0.0 if self.lost else self.factor * self.error

    def said(self, error: float) -> str:
        """What a failure says of the two errors."""
        if not np.isfinite(self.error):
            return (f"the reference's own {self.dtype} run is not finite, so it allows nothing beyond the table "
                    f"(method: {self.method})")
        if self.lost:
            return (f"the reference's own {self.dtype} run errs by {self.error:.3g}, over {self.LOST:g} of the "
                    f"output's scale {self.scale:.3g}: it lost the result in {self.dtype}, so it allows nothing "
                    f"beyond the table (method: {self.method})")
        if self.error == 0:
            return (f"the reference's own {self.dtype} run is exact here, so it allows nothing beyond the table "
                    f"(method: {self.method})")
        return (f"max error {error:.3g} is {error / self.error:.3g}x the reference's own {self.dtype} error "
                f"{self.error:.3g} (allowed {self.factor:g}x, method: {self.method})")


def max_abs_error(actual, expected) -> float:
    a, e = np.asarray(actual, dtype=np.complex128), np.asarray(expected, dtype=np.complex128)
    if a.shape != e.shape or a.size == 0:
        return float("nan") if a.shape != e.shape else 0.0
    with np.errstate(invalid="ignore"):
        d = np.abs(a - e)
    d = np.where(a == e, 0.0, d)  # equal infinities are no error
    d = np.where(np.isnan(d), np.inf, d)  # NaN where the reference has a number: unbounded error
    return float(d.max())


def relative_error(actual, expected) -> float:
    """The largest absolute difference over the elements finite in both, relative to the expected
    values' scale (their largest magnitude): the precision a result was computed at."""
    a, e = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    finite = np.isfinite(a) & np.isfinite(e)
    if a.shape != e.shape or not np.any(finite):
        return float("nan")
    scale = float(np.max(np.abs(e[finite])))
    return float(np.max(np.abs(a[finite] - e[finite]))) / scale if scale > 0 else 0.0
