"""Running one check and turning what happened into a result record.

The pytest items use it, and so does anything that wants verdicts without pytest
(the harness's own tests, the benchmark).
"""
from __future__ import annotations

import json
import time

from .checks import CHECKS, CheckContext, CheckFailed, CheckSkipped, unexpected_error


def _jsonable(d):
    return json.loads(json.dumps(d or {}, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def run_check(ctx: CheckContext, check: str) -> dict:
    """{'outcome': passed|failed|skipped, 'message': ..., 'details': ...} for one check."""
    started = time.perf_counter()
    rec: dict = {"check": check}
    try:
        if ctx.device != "cpu" and ctx.device not in ctx.adapter.devices():
            rec.update(outcome="skipped", message=f"{ctx.device} unavailable for {ctx.adapter.name} here",
                       unavailable=True)
            return rec
        reason = ctx.contract.skip_reason(check)
        if reason:
            rec.update(outcome="skipped", message=reason)
            return rec
        details = CHECKS[check](ctx)
        rec.update(outcome="passed", message="", details=_jsonable(details))
    except CheckSkipped as exc:
        rec.update(outcome="skipped", message=exc.reason)
        if exc.not_applicable:
            rec["not_applicable"] = True
    except CheckFailed as exc:
        rec.update(outcome="failed", message=exc.message, details=_jsonable(exc.details))
    except Exception as exc:  # the layer raised: the check fails at the layer's point of failure
        rec.update(outcome="failed", message=unexpected_error(exc))
    rec["duration"] = round(time.perf_counter() - started, 6)
    return rec


def context_for(contract, impl, framework: str, device: str = "cpu", seed: int = 0, state_map=None,
                impl_name: str = "") -> CheckContext:
    from .adapters import get_adapter
    return CheckContext(contract=contract, adapter=get_adapter(framework), impl=impl,
                        impl_name=impl_name or getattr(impl, "__qualname__", repr(impl)), device=device,
                        seed=seed, state_map=dict(state_map or {}))


def check_all(contract, impl, framework: str, checks=None, **kw) -> dict[str, dict]:
    """Every (or the named) check on one implementation: {check id: record}."""
    ctx = context_for(contract, impl, framework, **kw)
    return {c: run_check(ctx, c) for c in (checks or CHECKS)}
