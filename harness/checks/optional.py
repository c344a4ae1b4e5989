"""Adapter methods that not every adapter has yet: a check that needs one is skipped, saying so.

A skip here is honest: it names the framework and the method, and never reads as a pass.
"""
from __future__ import annotations

import os

from .base import CheckSkipped

_ADAPTERS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "adapters")


def _not_yet(ctx, method: str) -> CheckSkipped:
    return CheckSkipped(f"{ctx.adapter.name} adapter does not implement {method} yet")


def require(ctx, *methods: str) -> None:
    """Skip unless the adapter overrides every named method of the base interface."""
    from ..adapters.base import Adapter
    for method in methods:
        if getattr(type(ctx.adapter), method, None) is getattr(Adapter, method, None):
            raise _not_yet(ctx, method)


def call_adapter(ctx, method: str, *args, **kwargs):
    """Call an adapter method; a NotImplementedError raised by the adapter itself becomes a skip.

    One raised deeper (a framework's own NotImplementedError, e.g. torch forward mode through
    a Function without ``jvp``) is the implementation's failure and propagates.
    """
    require(ctx, method)
    try:
        return getattr(ctx.adapter, method)(*args, **kwargs)
    except NotImplementedError as exc:
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code  # where it was raised: the adapter's method, or a helper beside it
        own = getattr(getattr(type(ctx.adapter), method), "__code__", None)
        if code is own or os.path.dirname(os.path.abspath(code.co_filename)) == _ADAPTERS_DIR:
            raise _not_yet(ctx, method) from exc
        raise
