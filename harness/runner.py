"""Running one check and turning what happened into a result record.

The pytest items use it, and so does anything that wants verdicts without pytest (the harness's own
tests, the benchmark): one path, the same as a user's run. The code under test runs in executors
(``executor.Session``); the time limit and the global-state snapshot are enforced from outside
(``Session.begin_check``/``end_check``), so that a layer cannot change another's verdicts.
"""
from __future__ import annotations

import json
from contextlib import contextmanager

import numpy as np

from .binding import mapped
from .checks import CHECKS, DEFAULT_CHECKS, PER_DTYPE, CheckContext, CheckFailed, CheckSkipped, unexpected_error
from .checks.precision import attribute as attribute_precision
from .checks.blame import CheckBlocked, blocker_for
from .checks.common import NativeProblem
from .check_catalog import DEVICE_CHECKS, na_accepted, na_source  # the checks the cuda column runs; n/a's closed lists
from .errors import EnvironmentProblem, missing_dependency

DEFAULT_TIMEOUT = 60.0  # seconds per check; the contract's `timeout` and --check-timeout override it
DEFAULT_MEMORY_LIMIT_GIB = 8.0  # per process; --memory-limit overrides it, 0 lifts it


def _out_of_memory(exc: BaseException) -> bool:
    from .errors import out_of_memory
    return isinstance(exc, MemoryError) or out_of_memory(f"{getattr(exc, 'type_name', '')}: {exc}")


def _jsonable(d):
    """Plain JSON (no NaN/Infinity tokens, which browsers' JSON.parse rejects): those become strings."""
    def clean(v):
        if isinstance(v, float) and not np.isfinite(v):
            return str(v)
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v
    return clean(json.loads(json.dumps(d or {}, default=lambda o: o.item() if hasattr(o, "item") else str(o))))


def run_check(ctx: CheckContext, check: str, timeout: float | None = None) -> dict:
    """{'outcome': passed|failed|skipped|blocked|error, 'message': ..., 'details': ...} for one check:
    the verdict part of a ``layer_conformance.record.Record`` (every key but ``check`` is one of its fields; the
    plugin adds the identity). ``blocked`` (with ``blocked_by``): the check's failure is a symptom of a
    mistake that check names.

    The code under test runs in ``ctx.session``'s executors; the limits are enforced from outside (the
    executor is killed at the deadline).
    """
    from .boundary import CheckTimeout, ExecutorLost   # BaseExceptions: a check's ``except Exception`` cannot hide them
    rec: dict = {"check": check}
    if timeout is None:
        timeout = ctx.contract.timeout or DEFAULT_TIMEOUT
    notes: list = list(ctx.notes)
    try:
        said = _not_run_here(ctx, check)
        if said:
            rec.update(said)
            return rec
        with _isolation(ctx, notes, timeout):
            details = _checked(ctx, check)
        rec.update(outcome="passed", message="", details=_jsonable(details))
    except (CheckFailed, Exception, CheckTimeout, ExecutorLost) as exc:   # not KeyboardInterrupt: the run ends
        rec.update(_outcome_of(exc, ctx, check, timeout))
    if notes:
        rec.setdefault("details", {})["global_state"] = notes
    if rec.get("outcome") in ("failed", "error") and not rec.get("usage_error") and ctx.session.stderr_tail:
        rec.setdefault("details", {})["stderr_tail"] = ctx.session.stderr_tail  # kept out of the terminal
    return rec


def _not_run_here(ctx: CheckContext, check: str) -> dict | None:
    """The record's verdict where the check does not run on this target (no CUDA device, the cpu column's, the
    contract's n/a or skip, the n/a of a framework whose adapter lacks a method the check needs), else None."""
    from .checks.applicable import adapter_lacks, contract_says
    if ctx.device == "cuda" and ctx.adapter.gpu_device not in ctx.adapter.devices():
        return dict(outcome="skipped", message=f"no CUDA device for {ctx.adapter.name} here", unavailable=True)
    if ctx.device == "cuda" and check not in DEVICE_CHECKS:
        # the other checks run on cpu; the cuda column is about movement and parity
        return dict(outcome="skipped", message="runs in the cpu column; the cuda column checks the "
                                               "move to the GPU and output parity with cpu")
    # n/a, or checks.<id>.skip; then n/a where the framework's adapter lacks a method the check needs
    return contract_says(ctx.contract, check, ctx.adapter.name) or adapter_lacks(check, ctx.adapter)


def _checked(ctx: CheckContext, check: str):
    """The check's details; what it raised, told: the environment's problem, a symptom of a mistake another check
    names (blocked), or the check's own failure (its precision attributed where it runs per dtype)."""
    from .record import NotApplicable
    from .boundary import ExecutorLost
    from .state_map import StateMapError
    try:
        return CHECKS[check](ctx)
    except (CheckFailed, Exception) as exc:
        if isinstance(exc, (CheckSkipped, NotApplicable, ExecutorLost, StateMapError)) or _out_of_memory(exc) \
                or getattr(exc, "origin", None) == "reference" or isinstance(exc, NativeProblem):
            raise
        missing = missing_dependency(exc)
        if missing is not None:  # the environment, not the layer: a usage error (exit 4)
            raise EnvironmentProblem(missing) from exc
        # a symptom of a mistake another check names is reported as blocked by it
        blocked = blocker_for(ctx, check, exc)
        if blocked is None:
            if isinstance(exc, CheckFailed) and check in PER_DTYPE:
                attribute_precision(ctx, exc)  # which precision the layer computes at
            raise
        raise blocked from exc


def _outcome_of(exc: BaseException, ctx: CheckContext, check: str, timeout: float) -> dict:
    """The record's verdict from what the check raised."""
    from .record import NotApplicable
    from .state_map import StateMapError
    from .boundary import CheckTimeout, ExecutorLost, RemoteError
    if isinstance(exc, EnvironmentProblem):
        return dict(outcome="error", message=f"usage error: {exc}", usage_error=True)
    if isinstance(exc, StateMapError):   # a state map's transforms that do not fit the variable: the binding's
        return dict(outcome="error", message=f"usage error: state map: {exc}", usage_error=True)
    if isinstance(exc, CheckBlocked):
        return dict(outcome="blocked", message=exc.message, blocked_by=exc.by,
                    details=_jsonable({"symptom": exc.symptom, **({"blocked_in_own_dtype": True}
                                                                   if exc.in_own_dtype else {})}))
    if isinstance(exc, CheckTimeout):
        # an executor killed at the deadline says where it was from its own stack dump, if it gave one: the
        # judge's wait is no place to name
        where = exc.place or "(its executor was killed from outside)"
        return dict(outcome="error", message=f"{check} timed out after {timeout:g} s (per-check timeout; set "
                                             f"`timeout:` in the contract or --check-timeout): the layer hung {where}")
    if isinstance(exc, ExecutorLost):
        if exc.out_of_memory:
            return dict(outcome="error",
                        message=f"the layer exhausted the memory limit (--memory-limit): {exc.message}")
        return dict(outcome="error", message=f"{exc.message} while running {check}; the check is lost, "
                                             f"a fresh executor runs the next one")
    if isinstance(exc, NotApplicable):  # the one n/a: its one record form (layer_conformance.record.NotApplicable)
        refused = na_accepted(check, exc.code, ctx.adapter.name)
        if refused is None:
            return dict(outcome="skipped", message=exc.reason, not_applicable=True, na_source=na_source(exc),
                        details={"na_reason": exc.code})
        # n/a is the catalogue's word, not the code under test's: any other reason is the check's failure
        return dict(outcome="failed", message=f"{check} came to 'not applicable' ({exc.reason}) for a reason it "
                                              f"does not accept: {refused}")
    if isinstance(exc, CheckSkipped):   # a skip that is not n/a (see checks.base)
        return dict(outcome="skipped", message=exc.reason)
    if isinstance(exc, CheckFailed):
        return dict(outcome="failed", message=_both_named(ctx, check, exc.message), details=_jsonable(exc.details))
    if (getattr(exc, "origin", None) == "reference" and not isinstance(exc, RemoteError)) \
            or isinstance(exc, NativeProblem):  # impl_reference's, the native's (checks/common.py)
        return dict(outcome="error", message=f"{exc}: a contract problem, not the layer's")
    if isinstance(exc, RemoteError):
        if exc.origin == "reference":
            return dict(outcome="error", message=f"the contract's reference raised {exc.remote_text}: a contract "
                                                 f"problem, not the layer's")
        if _out_of_memory(exc):
            return dict(outcome="error", message=f"the layer exhausted the memory limit (--memory-limit): "
                                                 f"{exc.remote_text}")
        return dict(outcome="failed", message=exc.remote_text)  # the layer raised: it fails at its point of failure
    return dict(outcome="failed", message=unexpected_error(exc))  # a check's own code raised on the layer's answer


def _both_named(ctx, check: str, message: str) -> str:
    """A failure of a check that compares with the reference (those run per dtype), against a ``reference:
    {impl}``, names both implementations: ``layer mypkg:Port (jax) vs reference other:Original (torch): ...``."""
    if check not in PER_DTYPE or not ctx.contract.reference.impl:
        return message
    return f"layer {ctx.impl_name} ({ctx.adapter.name}) vs reference {ctx.contract.reference.label}: {message}"


@contextmanager
def _isolation(ctx, notes: list, timeout: float):
    """Global state and the time limit around one check, enforced by the executors from outside."""
    ctx.session.begin_check(ctx.adapter.name, timeout)
    try:
        yield
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run ends now, whatever the executor is doing
        ctx.session.abort()
        raise
    finally:
        notes += ctx.session.end_check(ctx.adapter.name)


def context_for(contract, impl: str, framework: str, *, session, device: str = "cpu", seed: int = 0,
                state_map=None, impl_name: str = "", arg_map=None, dtype: str | None = None) -> CheckContext:
    """A check context: ``impl`` (``module:attr``) imported and checked in ``session``'s executors (raises
    ``LoadFailed``). ``dtype``: one of the contract's ``dtypes`` (None: the cases' own); the checks see the
    contract as it runs there."""
    if not isinstance(impl, str):
        raise TypeError(f"context_for takes the implementation as 'module:attr', which its executor imports, "
                        f"not {type(impl).__name__}: the code under test never runs in the judge")
    contract = contract.for_dtype(dtype)
    arg_map = dict(arg_map or {})
    constructor = mapped(contract.constructor, arg_map) if contract.kind == "layer" else None
    handle, notes = session.load(framework, impl, constructor)
    return CheckContext(contract=contract, adapter=session.adapter(framework), impl=handle,
                        impl_name=impl_name or impl, device=device, seed=seed, state_map=dict(state_map or {}),
                        session=session, notes=list(notes), arg_map=arg_map, dtype=contract.dtype)


def check_all(contract, impl: str, framework: str, *, session, checks=None, timeout=None, **kw) -> dict[str, dict]:
    """Every default (or each named) check on one implementation (``module:attr``): {check id: record}."""
    ctx = context_for(contract, impl, framework, session=session, **kw)
    return {c: run_check(ctx, c, timeout=timeout) for c in (checks or DEFAULT_CHECKS)}
