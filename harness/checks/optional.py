"""Adapter methods that not every adapter has: a check that needs one is skipped, saying so.

A skip here is honest: it names the framework and the method, and never reads as a pass.
"""
from __future__ import annotations

from ..adapters.base import Unsupported
from ..errors import raised_in_adapter


def require(ctx, *methods: str) -> None:
    """Skip unless the adapter has its own version of every named method of the interface."""
    for method in methods:
        if not ctx.adapter.implements(method):
            raise Unsupported(f"the {ctx.adapter.name} adapter does not implement {method}")


def call_adapter(ctx, method: str, *args, **kwargs):
    """Call an adapter method; a NotImplementedError raised by the adapter itself means unsupported.

    One raised deeper (a framework's own NotImplementedError, e.g. torch forward mode through
    a Function without ``jvp``) is the implementation's failure and propagates. (In an executor
    the server makes the same distinction before the answer crosses the boundary.)
    """
    require(ctx, method)
    try:
        return getattr(ctx.adapter, method)(*args, **kwargs)
    except NotImplementedError as exc:
        if raised_in_adapter(exc):
            raise Unsupported(f"the {ctx.adapter.name} adapter does not implement {method}: {exc}") from exc
        raise
