"""Adapter methods that not every adapter has: a check that needs one is skipped, saying so.

A skip here is honest: it names the framework and the method, and never reads as a pass.
"""
from __future__ import annotations

from ..errors import raised_in_adapter
from ..record import NotApplicable
from .base import CheckFailed, CheckSkipped


def _not_yet(ctx, method: str) -> CheckSkipped:
    # the harness's gap, not the framework's: a skip, never "n/a"
    return CheckSkipped(f"{ctx.adapter.name} adapter does not implement {method} yet")


def require(ctx, *methods: str) -> None:
    """Skip unless the adapter has its own version of every named method of the interface."""
    for method in methods:
        if not ctx.adapter.implements(method):
            raise _not_yet(ctx, method)


def call_adapter(ctx, method: str, *args, **kwargs):
    """Call an adapter method; a NotImplementedError raised by the adapter itself means unsupported.

    One raised deeper (a framework's own NotImplementedError, e.g. torch forward mode through
    a Function without ``jvp``) is the implementation's failure and propagates. (In an executor
    the server makes the same distinction before the answer crosses the boundary.)
    """
    require(ctx, method)
    try:
        return getattr(ctx.adapter, method)(*args, **kwargs)
    except Exception as exc:
        if getattr(exc, "in_adapter", False) or (isinstance(exc, NotImplementedError) and _adapters_own(ctx, method, exc)):
            raise _not_yet(ctx, method) from exc
        raise


def adapter_part(ctx, method: str, *args, failed):
    """One part of a check through an adapter method: ``(result, None)``, or ``(None, words)`` for a part that did
    not run: "n/a: why" where the framework has no such mechanism, "not run: why" where it was skipped. Any other
    exception is the layer's: CheckFailed with ``failed(exc)``'s words."""
    try:
        return call_adapter(ctx, method, *args), None
    except NotApplicable as exc:
        return None, f"n/a: {exc}"
    except CheckSkipped as exc:
        return None, f"not run: {exc.reason}"
    except Exception as exc:
        raise CheckFailed(failed(exc)) from exc


def _adapters_own(ctx, method, exc) -> bool:
    """Raised by the adapter's method itself, or by adapter code beside it (not deeper, in the framework)."""
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    own = getattr(getattr(type(ctx.adapter), method, None), "__code__", None)
    return tb.tb_frame.f_code is own or raised_in_adapter(exc)
