"""Lets MXNet 1.9.1 import on numpy >= 1.24.

MXNet 1.9.1 (the last release) still uses the aliases ``numpy.bool/int/float/complex/
object/str`` that numpy 1.24 removed, so ``import mxnet`` fails without them. ``apply()``
puts back only the missing ones, as the builtins they used to be, and silences the
DeprecationWarnings mxnet's own modules raise while importing. Call it before the first
``import mxnet`` anywhere in the process, the user's own layer modules included::

    from layer_conformance.layerside.mxnet_shim import apply
    apply()
    import mxnet

The adapter and the bundled MXNet implementations call it themselves; it is idempotent. It imports no framework
(a top-level module of the layer side: ``layerside/mxnet/`` would import MXNet first). Its old path,
``layer_conformance.layerside.adapters.mxnet_shim``, still works.
"""
from __future__ import annotations

import builtins
import warnings

ALIASES = ("bool", "int", "float", "complex", "object", "str")


def apply() -> list[str]:
    """Restore the removed numpy aliases that are missing; returns the names it set."""
    import numpy
    # vars() rather than hasattr(): numpy 1.26 answers the removed names through a module
    # __getattr__ that warns before raising.
    missing = [name for name in ALIASES if name not in vars(numpy)]
    for name in missing:
        setattr(numpy, name, getattr(builtins, name))
    # Importing mxnet touches numpy names deprecated since 1.20 (and distutils): noise about
    # MXNet itself, not about the user's code.
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"mxnet(\.|$)")
    return missing
