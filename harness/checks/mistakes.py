"""Known mistakes, recognized by the shape of the error.

When ``values`` fails, the layer's outputs are compared with each applicable variant below, the
reference with one known mistake made on purpose; where every case matches a variant to the values
tolerance (and the variant differs from the reference somewhere), the failure names the mistake.
Each entry: the reference modules it applies to, what the mistake is, and a numpy function that
gives the mistaken output from the float64 inputs and the constructor arguments plus state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class KnownMistake:
    references: tuple          # reference module names (the contract's reference.module, last part)
    description: str
    variant: Callable          # (*inputs, **constructor_and_state) -> output


def _bias(y, bias):
    return y if bias is None or isinstance(bias, bool) else y + bias


def _rms_eps_outside(X, *, gain, eps, bias=None, **_):
    return _bias(X / (np.sqrt((X ** 2).mean(-1, keepdims=True)) + eps) * gain, bias)


def _rms_wrong_axis(X, *, gain, eps, bias=None, **_):
    return _bias(X / np.sqrt((X ** 2).mean(0, keepdims=True) + eps) * gain, bias)


def _rms_eps_dropped(X, *, gain, eps, bias=None, **_):
    return _bias(X / np.sqrt((X ** 2).mean(-1, keepdims=True)) * gain, bias)


def _centered_median(X, **_):
    return X - np.median(X, axis=-1, keepdims=True)


KNOWN_MISTAKES = (
    KnownMistake(("rmsnorm", "rmsnorm_bias"), "eps is added outside the square root: x / (sqrt(mean(x^2)) + eps) "
                 "instead of x / sqrt(mean(x^2) + eps)", _rms_eps_outside),
    KnownMistake(("rmsnorm", "rmsnorm_bias"), "the mean square is taken over the first axis (the batch) instead "
                 "of the last (the features)", _rms_wrong_axis),
    KnownMistake(("rmsnorm", "rmsnorm_bias"), "eps is left out: x / sqrt(mean(x^2))", _rms_eps_dropped),
    KnownMistake(("centered",), "the median is subtracted instead of the mean", _centered_median),
)


def recognize(ctx, state, outputs) -> str:
    """The known mistake that explains every case's output, as a sentence; else ''.
    ``outputs``: [(inputs, the layer's output)] for the cases checked."""
    module = ctx.contract.reference_module.rpartition(".")[2]
    kw = {**ctx.contract.constructor, **state}
    for mistake in KNOWN_MISTAKES:
        if module not in mistake.references:
            continue
        matched, differs = True, False
        _, forward, _ = ctx.contract.reference()
        for inputs, got in outputs:
            x64 = [np.asarray(a, dtype=np.float64) if np.issubdtype(a.dtype, np.floating) else a for a in inputs]
            try:
                want = mistake.variant(*x64, **kw)
            except Exception:  # a variant that does not apply to these inputs
                want = None
            if want is None or np.shape(want) != np.shape(got):
                matched = False
                break
            rtol, atol = ctx.tolerance("values", str(got.dtype))
            if not np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol, equal_nan=True):
                matched = False
                break
            ref = np.asarray(forward(*x64, **kw), dtype=np.float64)
            differs = differs or not np.allclose(ref, want, rtol=rtol, atol=atol, equal_nan=True)
        if matched and differs:
            return f"The outputs match a known mistake on every case: {mistake.description}"
    return ""
