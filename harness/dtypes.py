"""Floating dtypes by name, numpy-side: bfloat16 is ``ml_dtypes.bfloat16`` (numpy has none), imported
only when a bfloat16 array is made or read, so a run without one never needs it."""
from __future__ import annotations

import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
HALF = ("float16", "bfloat16")  # compared in ulps of the dtype (layer_conformance.tolerances)


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype called ``name`` ("bfloat16" included)."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def cast(a: np.ndarray, name: str) -> np.ndarray:
    return np.asarray(a).astype(np_dtype(name))


def is_floating(a) -> bool:
    """np.issubdtype does not know ml_dtypes' bfloat16 as floating."""
    dt = np.asarray(a).dtype if not isinstance(a, np.dtype) else a
    return np.issubdtype(dt, np.floating) or dt.name == "bfloat16"


def is_inexact(a) -> bool:
    dt = np.asarray(a).dtype if not isinstance(a, np.dtype) else a
    return np.issubdtype(dt, np.inexact) or dt.name == "bfloat16"
