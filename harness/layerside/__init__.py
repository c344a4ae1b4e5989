"""What runs beside the layer: the code of the executor processes, which hold frameworks and code under test.

``server`` (the request loop an executor runs; ``files`` and ``zygote`` its parts) and one folder per framework
(``torch/``, ``tensorflow/``, ``jax/``, ``mxnet/``: the same file names in each, one class per area of
``layer_conformance.protocol``, composed into ``FrameworkAdapter`` in the folder's ``__init__.py``) live here, and
nothing of the judge does: the judge (the pytest process) never imports this package, and this package imports of
the rest of ``layer_conformance`` only the modules both sides share (``frameworks``, ``record``, ``errors``,
``binding``, ``wire``, ``protocol``: plain data and pure functions). ``tests/meta_tests/test_boundary.py`` holds
both sides to it.

This module is the adapters' registry: a framework is never imported unless the user's object or the command line
asks for it, and detection looks at ``sys.modules`` first (as einops does).
"""
from __future__ import annotations

import importlib
import sys

from ..frameworks import FRAMEWORKS as _REGISTRY

# framework name -> top-level module that marks it (from the one registry, harness/frameworks.py)
FRAMEWORKS = {name: f.module for name, f in _REGISTRY.items()}

_cache: dict = {}


def adapter_module(name: str) -> str:
    """The package that holds ``name``'s adapter (importing it imports the framework)."""
    return f"{__name__}.{name}"


def get_adapter(name: str):
    if name not in FRAMEWORKS:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    if name not in _cache:
        mod = importlib.import_module(adapter_module(name))
        adapter = mod.FrameworkAdapter()
        adapter.configure_early()
        _cache[name] = adapter
    return _cache[name]


def detect(obj) -> str | None:
    """The framework an object belongs to, looking only at frameworks already imported."""
    for name, top in FRAMEWORKS.items():
        if top in sys.modules or name in sys.modules:  # JAX: flax marks it, jax alone is enough
            try:
                if get_adapter(name).owns(obj):
                    return name
            except ImportError:
                continue
    return None
