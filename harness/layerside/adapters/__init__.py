"""Framework adapters: one small module per framework, all with the same methods.

A framework is never imported unless the user's object or the command line asks
for it: detection looks at ``sys.modules`` first (as einops does).
To add a framework: write ``<name>.py`` with an ``Adapter`` subclass named
``FrameworkAdapter`` and list it in ``FRAMEWORKS``.
"""
from __future__ import annotations

import importlib
import sys

from ...frameworks import FRAMEWORKS as _REGISTRY

# framework name -> top-level module that marks it (from the one registry, harness/frameworks.py)
FRAMEWORKS = {name: f.module for name, f in _REGISTRY.items()}

_cache: dict = {}


def get_adapter(name: str):
    if name not in FRAMEWORKS:
        raise KeyError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}")
    if name not in _cache:
        mod = importlib.import_module(f"layer_conformance.layerside.adapters.{name}")
        adapter = mod.FrameworkAdapter()
        adapter.configure_early()
        _cache[name] = adapter
    return _cache[name]


def detect(obj) -> str | None:
    """The framework an object belongs to, looking only at frameworks already imported."""
    for name, top in FRAMEWORKS.items():
        if top in sys.modules or (name == "jax" and "jax" in sys.modules):
            try:
                if get_adapter(name).owns(obj):
                    return name
            except ImportError:
                continue
    return None
