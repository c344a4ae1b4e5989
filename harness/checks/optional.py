"""Adapter methods that not every adapter has: a check that needs one is skipped, saying so.

A skip here is honest: it names the framework and the method, and never reads as a pass.
"""
from __future__ import annotations

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
    """Call an adapter method the adapter implements (``require``: from the executor's hello, said before any code
    under test was imported). Whatever it raises is the implementation's, a NotImplementedError included (torch
    forward mode through a Function without ``jvp``): where an exception was raised is no evidence, since the code
    under test shares the process and can forge any traceback."""
    require(ctx, method)
    return getattr(ctx.adapter, method)(*args, **kwargs)


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
