"""Fresh executors are forked from a zygote: a process per framework that imported the framework and
nothing else. The child must be as fresh as a new process, reachable only by the judge, killable from
outside, and a zygote that died must be replaced."""
import os
import socket
import time

import pytest

from layer_conformance.boundary.client import CheckTimeout, Executor
from layer_conformance.boundary.session import Session

pytest.importorskip("torch")


def _state(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line.split()[1] for line in f if line.startswith("State:"))
    except OSError:
        return "gone"


def _eval(executor, expr):
    return executor.request("reference", module="builtins", function="eval", args=[expr])


def _own_pid(executor):
    """The pid an executor has in its own PID namespace (sandboxed: not the judge's number for it), which its
    children's getppid() gives."""
    return executor.hello["pid"]


def _host(parent, pid):
    """The judge's pid of ``parent``'s child that says ``pid`` (sandboxed, pids are the namespace's)."""
    from layer_conformance.boundary import sandbox
    return sandbox.host_pid(parent.pid, pid) if parent.sandbox.namespaces else pid


def _started_by_judge(pid):
    """Started by this process: its child, or (sandboxed) the grandchild of the unshare this process started."""
    return os.getpid() in (_ppid(pid), _ppid(_ppid(_ppid(pid))))


def test_a_fresh_executor_is_forked_and_has_run_nothing(session):
    with session.fresh_adapter("torch") as first, session.fresh_adapter("torch") as second:
        zygote = session.zygotes["torch"]
        a, b = first._executor, second._executor
        assert len({zygote.pid, a.pid, b.pid}) == 3
        assert _eval(a, "__import__('os').getppid()") == _own_pid(zygote)  # forked, not started
        assert _eval(a, "'torch._dynamo' in __import__('sys').modules") is True  # what the loaders need
        assert first.name == "torch" and first.numpy(first.tensor(__import__("numpy").ones(3))).sum() == 3.0
        # what one child does stays in it
        _eval(a, "__import__('sys').modules.setdefault('planted_by_a', object())")
        assert _eval(b, "'planted_by_a' in __import__('sys').modules") is False
    assert not a.alive and not b.alive
    assert session.zygotes["torch"].alive  # one zygote for the run


def test_a_connection_without_the_token_is_turned_away(session):
    zygote = session._executor(session.zygotes, "zygote", "torch")
    forked = zygote.request("fork", token="0123456789abcdef")
    intruder = socket.create_connection(("127.0.0.1", forked["port"]), timeout=10)
    intruder.sendall(repr("clientsock.sendall(b'ran')").encode() + b"\n")  # what execnet's bootstrap looks like
    assert intruder.recv(3) == b""  # closed without running it
    intruder.close()
    os.kill(_host(zygote, forked["pid"]), 9)
    # the judge's own connection, with its token, is served
    with session.fresh_adapter("torch") as fresh:
        assert _eval(fresh._executor, "1 + 1") == 2


def test_a_forked_executor_is_killed_from_outside(session):
    with session.fresh_adapter("torch") as fresh:
        ex = fresh._executor
        pid = ex.pid
        ex.deadline = time.monotonic() + 1
        with pytest.raises(CheckTimeout):
            _eval(ex, "__import__('time').sleep(60)")
        assert not ex.alive
        for _ in range(50):
            if _state(pid) in ("Z", "gone"):
                break
            time.sleep(0.1)
        assert _state(pid) in ("Z", "gone")  # SIGKILLed; the zygote reaps it at its next fork


def test_a_dead_zygote_is_replaced(session):
    with session.fresh_adapter("torch"):
        pass
    zygote = session.zygotes["torch"]
    os.kill(zygote.pid, 9)
    with session.fresh_adapter("torch") as fresh:
        assert _eval(fresh._executor, "__import__('os').getppid()") == _own_pid(session.zygotes["torch"])
    assert zygote.started == 2


def test_a_stopped_zygote_is_resumed_not_waited_out(session):
    """A layer forked from the zygote can SIGSTOP it (they share a PID namespace): the judge, waiting on the
    zygote for the next fork, sends it SIGCONT, so the fork is served by the same zygote at once instead of
    timing out (FORK_TIMEOUT) and replacing it."""
    import signal
    with session.fresh_adapter("torch"):
        pass
    zygote = session.zygotes["torch"]
    os.kill(zygote.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while _state(zygote.pid) != "T":  # the signal is delivered soon after, not within the call
        assert time.monotonic() < deadline, _state(zygote.pid)
        time.sleep(0.01)
    with session.fresh_adapter("torch") as fresh:
        assert _eval(fresh._executor, "__import__('os').getppid()") == _own_pid(zygote)
    assert zygote.started == 1 and _state(zygote.pid) != "T"


def test_only_the_zygote_forks():
    ex = Executor("fresh", "torch")
    try:
        ex.start()
        with pytest.raises(Exception, match="only the zygote forks"):
            ex.request("fork", token="x")
    finally:
        ex.close()


def test_an_interrupted_run_kills_the_fresh_executor_in_use(session):
    with session.fresh_adapter("torch") as fresh:
        pid = fresh._executor.pid
        session.abort()
        assert not fresh._executor.alive
        for _ in range(50):
            if _state(pid) in ("Z", "gone"):
                break
            time.sleep(0.1)
        assert _state(pid) in ("Z", "gone")


def test_a_checks_fresh_executors_are_forked_from_its_sessions_zygote(session):
    # what a check asks for (ctx.fresh_adapter: the export check's deployment process) is forked from the
    # session's zygote, not started anew, and is neither the layer executor nor the zygote
    from layer_conformance.contract import bundled_contracts, load_contract
    from layer_conformance.runner import context_for
    ctx = context_for(load_contract(bundled_contracts()["rmsnorm"]),
                      "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch", session=session)
    assert ctx.session is session
    with ctx.fresh_adapter() as fresh:
        zygote = session.zygotes["torch"]
        assert _eval(fresh._executor, "__import__('os').getppid()") == _own_pid(zygote)
        assert len({fresh._executor.pid, zygote.pid, session.layer["torch"].pid}) == 3
        # the code under test was imported in the layer executor only
        under_test = "layer_conformance.reference_impls.torch.rmsnorm"
        assert _eval(fresh._executor, f"{under_test!r} in __import__('sys').modules") is False
    assert not fresh._executor.alive and zygote.alive


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_fresh_executor_has_what_its_formats_load_already_imported(session, framework):
    """What a loaded program's first call imports (JAX: scipy.linalg for LAPACK, 0.5 s; torch: the symbolic
    batch dimension's sympy modules) is imported once, in the zygote, not in every fresh executor."""
    pytest.importorskip(framework)
    import importlib
    wanted = importlib.import_module(f"layer_conformance.layerside.{framework}").FrameworkAdapter.preloaded
    assert wanted
    with session.fresh_adapter(framework) as fresh:
        missing = _eval(fresh._executor, f"[m for m in {list(wanted)!r} if m not in __import__('sys').modules]")
    assert missing == []


def test_a_preloaded_module_another_version_lacks_is_left_out(monkeypatch):
    from layer_conformance.layerside.torch import FrameworkAdapter
    from layer_conformance.layerside import server
    monkeypatch.setattr(FrameworkAdapter, "preloaded", ("no_such_module_in_any_torch", "json"))
    server._preload("torch")  # no error: the zygote starts without it
    with pytest.raises(ModuleNotFoundError):
        server._import_or_call(["no_such_module_in_any_torch"])


def _ppid(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("PPid:")))


def test_a_run_imports_the_framework_once_in_its_zygote(session):
    """The zygote is the one process of the framework the judge starts: the layer and native executors are its
    forks, each as fresh as a process started then; a zygote that died is replaced, and a new target's layer
    executor is forked from the new one."""
    adapter = session.adapter("torch")
    layer, native, zygote = session.layer["torch"], session.native["torch"], session.zygotes["torch"]
    assert _started_by_judge(zygote.pid)
    for forked in (layer, native):
        assert _eval(forked, "__import__('os').getppid()") == _own_pid(zygote), forked.role
    assert len({layer.pid, native.pid, zygote.pid}) == 3
    assert adapter.name == "torch" and _eval(native, "__import__('torch').ones(2).sum().item()") == 2.0
    # what the layer executor does stays in it
    _eval(layer, "__import__('sys').modules.setdefault('planted_by_the_layer', object())")
    assert _eval(zygote, "'planted_by_the_layer' in __import__('sys').modules") is False
    assert _eval(native, "'planted_by_the_layer' in __import__('sys').modules") is False
    os.kill(zygote.pid, 9)
    layer.kill()  # as a new target's load does
    layer.ensure()
    assert _eval(layer, "__import__('os').getppid()") == _own_pid(session.zygotes["torch"])
    assert zygote.started == 2


def test_the_zygote_imports_the_compilers_modules_while_it_waits(session):
    """After its first forks the zygote imports ``preloaded_when_idle`` (what a first torch.compile imports,
    0.7 s of each target's compiled check otherwise), so that a later target's executor has them; the
    executors forked before it are served at once and import what they need themselves."""
    from layer_conformance.layerside.torch import FrameworkAdapter
    wanted = list(FrameworkAdapter.preloaded_when_idle)
    assert wanted
    session.adapter("torch")
    zygote = session.zygotes["torch"]
    deadline = time.monotonic() + 60
    while _eval(zygote, f"[m for m in {wanted!r} if m not in __import__('sys').modules]"):
        assert time.monotonic() < deadline, "the zygote never imported its idle modules"
        time.sleep(0.2)
    with session.fresh_adapter("torch") as fresh:
        assert _eval(fresh._executor, f"[m for m in {wanted!r} if m not in __import__('sys').modules]") == []


def test_a_module_the_zygote_cannot_import_while_idle_is_no_error(monkeypatch):
    from layer_conformance.layerside import server
    server._import_idle("no_such_module_in_any_torch")  # only a saving: nothing raised
