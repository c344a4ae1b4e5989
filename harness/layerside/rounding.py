"""A contract's reference run in a dtype below float64, in the reference executor: the reference's own error in
that dtype, which a layer's error is measured against (``layer_conformance.tolerances.reference_error_factor``).

float32: numpy computes in float32 natively (BLAS matmuls, pairwise sums), so the reference's floating inputs,
state and arguments are given in float32 and it runs as written; where its result is not float32 then (a float64
constant promotes it), it is emulated as below, with float64 arithmetic between the roundings. 16 bits: numpy has
no bfloat16 arithmetic (ml_dtypes' bfloat16 sums one term at a time in bfloat16, far below what any framework does)
and float16's is the same model, so both are emulated: the floating inputs and state are rounded to the dtype and
held in float32 arrays whose every numpy operation (a ufunc: arithmetic, functions, ``@``, sums; and every other
numpy function: ``np.dot``, ``np.einsum``, ``np.tensordot``, ``np.linalg.norm``...) computes in float32 from the
rounded values and rounds its result to the dtype, as a framework computes a 16-bit tensor op by op with float32
accumulation. A statistic (a mean, variance or standard deviation) is held in the accumulation precision, as the
norm kernels (torch's layer_norm, group_norm, rms_norm; Keras'; XLA's fusions) hold theirs (a 16-bit mean of values
near 30 would err by a tenth of a unit-variance group's spread): it reads its operand before that operand's
rounding (the kernel fuses x ** 2 into the sum), it is not rounded, and what is computed from statistics and
scalars alone (1 / sqrt(var + eps)) stays there; it is rounded where it meets a full tensor. The accumulation
precision is float32, or the contract's ``accumulate`` where it states a wider one. A reference that converts its arguments
(``np.asarray(x, dtype=np.float64)``) escapes the rounding inside: its output alone is rounded, and the method
says so.
"""
from __future__ import annotations

import numpy as np

HALF = ("float16", "bfloat16")
# the functions whose result a kernel holds in its accumulation precision (np.mean and ndarray.mean alike)
STATISTICS = frozenset({"mean", "var", "std", "nanmean", "nanvar", "nanstd"})


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _floating(a) -> bool:
    dt = np.asarray(a).dtype
    return np.issubdtype(dt, np.floating) or dt.name == "bfloat16"


def _plain(value):
    """``value`` with every Rounded array, in lists, tuples and dicts too, viewed as a plain ndarray."""
    if isinstance(value, Rounded):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _arrays(value) -> list:
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays(v)]
    return []


class Rounded(np.ndarray):
    """Values representable in ``target``, held in ``storage`` (float32 for 16 bits, float64 for float32, or for
    16 bits where the contract accumulates in float64); every numpy operation's result is rounded to ``target``,
    a statistic's to ``held`` (the accumulation precision). numpy's own mean would round its sum first, which
    overflows float16 where the framework's mean does not: each statistic is one operation."""
    target: np.dtype = np.dtype(np.float16)
    storage: np.dtype = np.dtype(np.float32)
    held: np.dtype = np.dtype(np.float32)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = _plain(list(inputs))
        if out is not None:
            outs = tuple(_plain(list(out)))
            getattr(ufunc, method)(*plain, out=outs, **kwargs)
            self._round_in_place(outs)
            return out[0] if len(out) == 1 else out
        result = getattr(ufunc, method)(*plain, **kwargs)
        if method != "__call__":
            return self._rounded(result)
        if all(_statistic(x) for x in inputs):   # eps added to a variance, its rsqrt: still the kernel's float32
            return self._rounded(result, self.held, statistic=True)
        return self._rounded(result, wide=result)

    def __array_function__(self, func, types, args, kwargs):
        # every numpy function computes on the plain float32 values (a contraction or reduction accumulates there,
        # as a framework's does) and its result is rounded once; a view of an argument is already representable
        plain_args, plain_kwargs = _plain(list(args)), _plain(dict(kwargs))
        statistic = func.__name__ in STATISTICS
        if statistic and args and isinstance(args[0], Rounded):
            # the statistic of an elementwise result (x ** 2) reads it before its rounding, as a kernel that fuses
            # the square into the sum does (in float16, x ** 2 overflows past 256 and underflows below 2e-4)
            plain_args[0] = np.asarray(getattr(args[0], "_wide", plain_args[0])).astype(self.held)
        result = func(*plain_args, **plain_kwargs)
        if plain_kwargs.get("out") is not None:
            self._round_in_place(_arrays(plain_kwargs["out"]))
            return kwargs["out"]
        if statistic:
            return self._rounded(result, self.held, statistic=True)
        return self._rounded(result, shares=_arrays([plain_args, plain_kwargs]))

    def _round_in_place(self, outs):
        for o in outs:
            if isinstance(o, np.ndarray) and _floating(o):
                o[...] = np.asarray(o).astype(self.target).astype(o.dtype)

    def _rounded(self, value, to=None, shares=(), statistic=False, wide=None):
        if isinstance(value, tuple):
            items = [self._rounded(v, to, shares) for v in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, list):
            return [self._rounded(v, to, shares) for v in value]
        if not isinstance(value, (np.ndarray, np.generic)) or not _floating(value) \
                or np.iscomplexobj(value):
            return value
        if isinstance(value, np.ndarray) and any(np.may_share_memory(value, a) for a in shares):
            return value.view(type(self))   # a reshape or transpose: writes through it must reach the original
        with np.errstate(over="ignore"):   # a 16-bit overflow is the dtype's inf, as the framework's would be
            rounded = np.asarray(value).astype(to or self.target).astype(self.storage).view(type(self))
        if statistic:
            rounded._statistic = True
        elif wide is not None and np.ndim(wide):
            rounded._wide = np.asarray(wide)
        return rounded

    def mean(self, *args, **kwargs):
        return np.mean(self, *args, **kwargs)

    def var(self, *args, **kwargs):
        return np.var(self, *args, **kwargs)

    def std(self, *args, **kwargs):
        return np.std(self, *args, **kwargs)

    def dot(self, other, *args, **kwargs):
        return np.dot(self, other, *args, **kwargs)   # ndarray.dot does not dispatch: np.dot does


def _statistic(x) -> bool:
    """Whether an operand keeps an operation in the accumulation precision: a statistic, or a scalar."""
    return getattr(x, "_statistic", False) if isinstance(x, Rounded) else np.ndim(x) == 0


_CLASSES: dict[tuple, type] = {}


def _rounded_class(name: str, accumulate: str | None = None) -> type:
    """The Rounded class of dtype ``name``, its statistics held in ``accumulate`` (float32 where None or
    narrower; never narrower than ``name`` itself)."""
    key = (name, accumulate)
    if key not in _CLASSES:
        target = _dtype(name)
        held = max(np.dtype(accumulate or np.float32), np.dtype(np.float32), key=lambda d: d.itemsize)
        held = max(held, target if name not in HALF else held, key=lambda d: d.itemsize)
        storage = np.dtype(np.float32 if name in HALF else np.float64)
        storage = max(storage, held, key=lambda d: d.itemsize)
        _CLASSES[key] = type(f"Rounded_{name}", (Rounded,), {"target": target, "storage": storage, "held": held})
    return _CLASSES[key]


def _to(value, name: str, cls):
    """A floating argument in the dtype: an array of it (computed natively, ``cls`` None), or a Rounded one."""
    if isinstance(value, np.ndarray) and _floating(value):
        rounded = value.astype(_dtype(name))
        return rounded if cls is None else rounded.astype(cls.storage).view(cls)
    if isinstance(value, dict):
        return {k: _to(v, name, cls) for k, v in value.items()}
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


def _run(fn, name: str, args, kwargs, cls):
    seen: list = []
    result = fn(*[_to(a, name, cls) for a in args], **{k: _to(v, name, cls) for k, v in kwargs.items()})
    return _back(result, name, seen, cls is not None), bool(seen) and all(seen)


def run_in_dtype(fn, name: str, args, kwargs, accumulate: str | None = None) -> tuple:
    """``fn`` (a reference's forward or VJP) run in dtype ``name``: (its result, how it ran). float32 natively
    first; where the reference leaves float32 there (a float64 constant promotes it), emulated as 16 bits are,
    with float64 arithmetic between the roundings. ``accumulate``: the contract's, the least precision its
    statistics are held in."""
    if name not in HALF:
        result, native = _run(fn, name, args, kwargs, None)
        if native:
            return result, f"reference computed in {name}"
    cls = _rounded_class(name, accumulate)
    result, inside = _run(fn, name, args, kwargs, cls)
    between = cls.storage.name
    if inside:
        return result, (f"reference emulated in {name}: inputs, state and every numpy operation's result rounded "
                        f"to {name}, {between} arithmetic and accumulation between, statistics (mean, var, std) "
                        f"held in {cls.held.name}")
    return result, (f"reference emulated in {name}: inputs and state rounded to {name}; the reference converts "
                    f"them, so its output alone is rounded")
