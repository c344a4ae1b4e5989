"""A contract's reference run in a dtype below float64, in the reference executor: the reference's own error in
that dtype, which a layer's error is measured against (``layer_conformance.tolerances.reference_error_factor``).

float32: numpy computes in float32 natively (BLAS matmuls, pairwise sums), so the reference's floating inputs,
state and arguments are given in float32 and it runs as written; where its result is not float32 then (a float64
constant promotes it), it is emulated as below, with float64 arithmetic between the roundings. 16 bits: numpy has no bfloat16 arithmetic
(ml_dtypes' bfloat16 sums one term at a time in bfloat16, far below what any framework does) and float16's
is the same model, so both are emulated: the floating inputs and state are rounded to the dtype and held in
float32 arrays whose every numpy operation (a ufunc: arithmetic, functions, matmul, reductions) computes in
float32 and rounds its result to the dtype, as a framework computes a 16-bit tensor op by op with float32
accumulation. A reference that converts its arguments (``np.asarray(x, dtype=np.float64)``) escapes the
rounding inside: its output alone is rounded, and the method says so.
"""
from __future__ import annotations

import numpy as np

HALF = ("float16", "bfloat16")


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _floating(a) -> bool:
    dt = np.asarray(a).dtype
    return np.issubdtype(dt, np.floating) or dt.name == "bfloat16"


class Rounded(np.ndarray):
    """Values representable in ``target``, held in ``storage`` (float32 for 16 bits, float64 for float32); every
    ufunc's result is rounded to ``target``. A mean, variance or standard deviation is one operation, rounded once
    (as a framework's reduction is): numpy's own would round its sum first, which overflows float16 where the
    framework's mean does not."""
    target: np.dtype = np.dtype(np.float16)
    storage: np.dtype = np.dtype(np.float32)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, Rounded) else x for x in inputs]
        if out is not None:
            outs = tuple(o.view(np.ndarray) if isinstance(o, Rounded) else o for o in out)
            getattr(ufunc, method)(*plain, out=outs, **kwargs)
            for o in outs:
                if _floating(o):
                    o[...] = np.asarray(o).astype(self.target).astype(o.dtype)
            return out[0] if len(out) == 1 else out
        result = getattr(ufunc, method)(*plain, **kwargs)
        if isinstance(result, tuple):
            return tuple(self._rounded(r) for r in result)
        return self._rounded(result)

    def _rounded(self, value):
        if not _floating(value):
            return value
        return np.asarray(value).astype(self.target).astype(self.storage).view(type(self))

    def mean(self, *args, **kwargs):
        return self._rounded(self.view(np.ndarray).mean(*args, **kwargs))

    def var(self, *args, **kwargs):
        return self._rounded(self.view(np.ndarray).var(*args, **kwargs))

    def std(self, *args, **kwargs):
        return self._rounded(self.view(np.ndarray).std(*args, **kwargs))


_CLASSES: dict[str, type] = {}


def _rounded_class(name: str) -> type:
    if name not in _CLASSES:
        storage = np.dtype(np.float32 if name in HALF else np.float64)
        _CLASSES[name] = type(f"Rounded_{name}", (Rounded,), {"target": _dtype(name), "storage": storage})
    return _CLASSES[name]


def _to(value, name: str, emulated: bool):
    """A floating argument in the dtype: an array of it (computed natively), or a Rounded one (emulated)."""
    if isinstance(value, np.ndarray) and _floating(value):
        rounded = value.astype(_dtype(name))
        if not emulated:
            return rounded
        cls = _rounded_class(name)
        return rounded.astype(cls.storage).view(cls)
    if isinstance(value, dict):
        return {k: _to(v, name, emulated) for k, v in value.items()}
    return value


def _back(value, name: str, seen: list, emulated: bool):
    """The reference's result rounded to the dtype and sent as float64; ``seen`` collects whether each floating
    array came back in the dtype's arithmetic (an array of the dtype, or a Rounded one where emulated)."""
    if isinstance(value, dict):
        return {k: _back(v, name, seen, emulated) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_back(v, name, seen, emulated) for v in value)
    if isinstance(value, (np.ndarray, np.generic)) and _floating(value):
        seen.append(isinstance(value, Rounded) if emulated else np.asarray(value).dtype == _dtype(name))
        return np.asarray(np.asarray(value).view(np.ndarray) if isinstance(value, Rounded) else value) \
            .astype(_dtype(name)).astype(np.float64)
    return value


def _run(fn, name: str, args, kwargs, emulated: bool):
    seen: list = []
    result = fn(*[_to(a, name, emulated) for a in args], **{k: _to(v, name, emulated) for k, v in kwargs.items()})
    return _back(result, name, seen, emulated), bool(seen) and all(seen)


def run_in_dtype(fn, name: str, args, kwargs) -> tuple:
    """``fn`` (a reference's forward or VJP) run in dtype ``name``: (its result, how it ran). float32 natively
    first; where the reference leaves float32 there (a float64 constant promotes it), emulated as 16 bits are,
    with float64 arithmetic between the roundings."""
    if name not in HALF:
        result, native = _run(fn, name, args, kwargs, emulated=False)
        if native:
            return result, f"reference computed in {name}"
    result, inside = _run(fn, name, args, kwargs, emulated=True)
    between = "float32" if name in HALF else "float64"
    if inside:
        return result, (f"reference emulated in {name}: inputs, state and every numpy operation's result rounded "
                        f"to {name}, {between} arithmetic between")
    return result, (f"reference emulated in {name}: inputs and state rounded to {name}; the reference converts "
                    f"them, so its output alone is rounded")
