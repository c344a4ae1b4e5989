"""Running one check and turning what happened into a result record.

The pytest items use it, and so does anything that wants verdicts without pytest
(the harness's own tests, the benchmark). A check runs under a timeout, and whatever global
state the layer changes (default dtype, RNG, threads, x64) is put back afterwards so that it
cannot change another implementation's verdicts.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import contextmanager

import numpy as np

from .binding import mapped
from .checks import CHECKS, DEFAULT_CHECKS, PER_DTYPE, CheckContext, CheckFailed, CheckSkipped, unexpected_error
from .checks.precision import attribute as attribute_precision
from .checks.blame import CheckBlocked, blocker_for
from .errors import EnvironmentProblem, missing_dependency

DEVICE_CHECKS = ("devices", "device_parity")
DEFAULT_TIMEOUT = 60.0  # seconds per check; the contract's `timeout` and --check-timeout override it
DEFAULT_MEMORY_LIMIT_GIB = 8.0  # per process; --memory-limit overrides it, 0 lifts it


def limit_memory(gib: float) -> None:
    """Cap this process's data segment so a layer that exhausts memory gets an allocation error
    (MemoryError, torch's "can't allocate memory") instead of taking the machine down."""
    import resource
    if not gib or not hasattr(resource, "RLIMIT_DATA"):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    want = int(gib * 2 ** 30)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or want < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (want, hard))


def _out_of_memory(exc: BaseException) -> bool:
    from .errors import out_of_memory
    return isinstance(exc, MemoryError) or out_of_memory(f"{getattr(exc, 'type_name', '')}: {exc}")


class CheckTimeout(BaseException):
    """Raised into a check that ran too long. A BaseException, so a layer's ``except Exception`` cannot swallow it."""


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


@contextmanager
def time_limit(seconds: float | None):
    """SIGALRM-based limit: interrupts Python code (an infinite loop in forward, a lock that never comes free).
    Only in the main thread. A hang inside native code never returns to Python, so the signal handler never
    runs: in an xdist worker a watchdog then ends the process, and the check is recorded as lost with it."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise CheckTimeout(f"timed out after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    watchdog = _watchdog(seconds + NATIVE_HANG_GRACE) if os.environ.get("PYTEST_XDIST_WORKER") else None
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if watchdog is not None:
            watchdog.cancel()


NATIVE_HANG_GRACE = 10.0  # seconds past the timeout before a worker stuck in native code is ended


def _watchdog(seconds: float) -> threading.Timer:
    def end_worker():
        sys.stderr.write(f"layer conformance: a check hung in native code past its timeout ({seconds:g} s); "
                         f"ending this worker\n")
        sys.stderr.flush()
        os._exit(70)
    timer = threading.Timer(seconds, end_worker)
    timer.daemon = True
    timer.start()
    return timer


@contextmanager
def isolated_globals(adapter, notes: list):
    """Snapshot the global state a layer could change, restore it after, and say what changed."""
    np_state = np.random.get_state()
    saved = adapter.save_globals()
    try:
        yield
    finally:
        changed = adapter.restore_globals(saved)
        after = np.random.get_state()
        if not (np_state[0] == after[0] and np.array_equal(np_state[1], after[1]) and np_state[2:] == after[2:]):
            changed = list(changed) + ["numpy's global RNG state"]
        np.random.set_state(np_state)
        if changed:
            notes.append("the layer changed global state (restored): " + ", ".join(changed))


def run_check(ctx: CheckContext, check: str, timeout: float | None = None) -> dict:
    """{'outcome': passed|failed|skipped|blocked|error, 'message': ..., 'details': ...} for one check:
    the verdict part of a ``layer_conformance.record.Record`` (every key but ``check`` is one of its fields; the
    plugin adds the identity). ``blocked`` (with ``blocked_by``): the check's failure is a symptom of a
    mistake that check names.

    With ``ctx.session`` the code under test runs in executors and the limits are enforced from
    outside (the executor is killed); without, in this process (the harness's own unit tests).
    """
    from .adapters.base import Unsupported
    from .checks.applicable import not_applicable
    from .executor import CheckTimeout as ExecutorTimeout, ExecutorLost, RemoteError
    rec: dict = {"check": check}
    if timeout is None:
        timeout = ctx.contract.timeout or DEFAULT_TIMEOUT
    notes: list = list(ctx.notes)
    try:
        if ctx.device == "cuda" and ctx.adapter.gpu_device not in ctx.adapter.devices():
            rec.update(outcome="skipped", message=f"no CUDA device for {ctx.adapter.name} here",
                       unavailable=True)
            return rec
        if ctx.device == "cuda" and check not in DEVICE_CHECKS:
            # the other checks run on cpu; the cuda column is about movement and parity
            rec.update(outcome="skipped", message="runs in the cpu column; the cuda column checks the "
                                                  "move to the GPU and output parity with cpu")
            return rec
        reason = ctx.contract.skip_reason(check)
        if reason:
            rec.update(outcome="skipped", message=reason)
            return rec
        reason = not_applicable(ctx.contract, check, ctx.adapter.name)
        if reason:
            rec.update(outcome="skipped", message=reason, not_applicable=True)
            return rec
        with _isolation(ctx, notes, timeout):
            try:
                details = CHECKS[check](ctx)
            except (CheckFailed, Exception) as exc:
                if isinstance(exc, (CheckSkipped, Unsupported, ExecutorLost)) or _out_of_memory(exc) \
                        or getattr(exc, "origin", None) == "reference":
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
        rec.update(outcome="passed", message="", details=_jsonable(details))
    except EnvironmentProblem as exc:
        rec.update(outcome="error", message=f"usage error: {exc}", usage_error=True)
    except CheckBlocked as exc:
        rec.update(outcome="blocked", message=exc.message, blocked_by=exc.by,
                   details=_jsonable({"symptom": exc.symptom, **({"blocked_in_own_dtype": True}
                                                                  if exc.in_own_dtype else {})}))
    except (CheckTimeout, ExecutorTimeout) as exc:
        # an executor killed at the deadline says where it was from its own stack dump, if it gave one: the
        # judge's wait is no place to name
        where = (exc.place if isinstance(exc, ExecutorTimeout) else _where(exc)) or \
            "(its executor was killed from outside)"
        rec.update(outcome="error", message=f"{check} timed out after {timeout:g} s (per-check timeout; set "
                                            f"`timeout:` in the contract or --check-timeout): the layer hung {where}")
    except ExecutorLost as exc:
        if exc.out_of_memory:
            rec.update(outcome="error", message=f"the layer exhausted the memory limit (--memory-limit): {exc.message}")
        else:
            rec.update(outcome="error", message=f"{exc.message} while running {check}; the check is lost, "
                                                f"a fresh executor runs the next one")
    except (CheckSkipped, Unsupported) as exc:
        rec.update(outcome="skipped", message=getattr(exc, "reason", None) or str(exc))
        if isinstance(exc, Unsupported) or exc.not_applicable:
            rec["not_applicable"] = True
    except CheckFailed as exc:
        rec.update(outcome="failed", message=exc.message, details=_jsonable(exc.details))
    except RemoteError as exc:
        if exc.origin == "reference":
            rec.update(outcome="error", message=f"the contract's reference raised {exc.remote_text}: a contract "
                                                f"problem, not the layer's")
        elif _out_of_memory(exc):
            rec.update(outcome="error", message=f"the layer exhausted the memory limit (--memory-limit): "
                                                f"{exc.remote_text}")
        else:  # the layer raised: the check fails at the layer's point of failure
            rec.update(outcome="failed", message=exc.remote_text)
    except Exception as exc:  # the layer raised in this process (no executor)
        if _out_of_memory(exc):
            rec.update(outcome="error", message=f"the layer exhausted the memory limit (--memory-limit): "
                                                f"{unexpected_error(exc)}")
        else:
            rec.update(outcome="failed", message=unexpected_error(exc))
    if notes:
        rec.setdefault("details", {})["global_state"] = notes
    if rec.get("outcome") in ("failed", "error") and not rec.get("usage_error") and ctx.session is not None \
            and ctx.session.stderr_tail:
        rec.setdefault("details", {})["stderr_tail"] = ctx.session.stderr_tail  # kept out of the terminal
    return rec


@contextmanager
def _isolation(ctx, notes: list, timeout: float):
    """Global state and the time limit around one check: from outside when in an executor."""
    if ctx.session is None:
        with isolated_globals(ctx.adapter, notes), time_limit(timeout):
            yield
        return
    ctx.session.begin_check(ctx.adapter.name, timeout)
    try:
        yield
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run ends now, whatever the executor is doing
        ctx.session.abort()
        raise
    finally:
        notes += ctx.session.end_check(ctx.adapter.name)


def _where(exc) -> str:
    text = unexpected_error(exc)
    return text[text.rfind("(at "):] if "(at " in text else ""


def context_for(contract, impl, framework: str, device: str = "cpu", seed: int = 0, state_map=None,
                impl_name: str = "", session=None, arg_map=None, dtype: str | None = None) -> CheckContext:
    """A check context. ``impl`` is an object (checked in this process) or, with ``session``, a
    ``module:attr`` string imported and checked in an executor (raises ``LoadFailed``). ``dtype``: one
    of the contract's ``dtypes`` (None: the cases' own); the checks see the contract as it runs there."""
    contract = contract.for_dtype(dtype)
    dtype = contract.dtype
    if session is not None:
        arg_map = dict(arg_map or {})
        constructor = mapped(contract.constructor, arg_map) if contract.kind == "layer" else None
        handle, notes = session.load(framework, impl, constructor)
        return CheckContext(contract=contract, adapter=session.adapter(framework), impl=handle,
                            impl_name=impl_name or impl, device=device, seed=seed,
                            state_map=dict(state_map or {}), session=session, notes=list(notes), arg_map=arg_map,
                            dtype=dtype)
    from .adapters import get_adapter
    return CheckContext(contract=contract, adapter=get_adapter(framework), impl=impl,
                        impl_name=impl_name or getattr(impl, "__qualname__", repr(impl)), device=device,
                        seed=seed, state_map=dict(state_map or {}), arg_map=dict(arg_map or {}), dtype=dtype)


def check_all(contract, impl, framework: str, checks=None, timeout=None, **kw) -> dict[str, dict]:
    """Every default (or each named) check on one implementation: {check id: record}."""
    ctx = context_for(contract, impl, framework, **kw)
    return {c: run_check(ctx, c, timeout=timeout) for c in (checks or DEFAULT_CHECKS)}
