"""The zygote: an executor that imports a framework and nothing else, then forks a fresh executor per request
(``Server.op_fork``), each listening on a loopback port for the judge's execnet gateway; a zygote kept between
runs (``serve_warm``, boundary/warm.py) serves one judge after another. Also what it imports first and while
idle, and how its children ended."""
from __future__ import annotations

import importlib
import os
import sys
import time


def _import_or_call(entries, missing_ok=False) -> None:
    """Each entry ``module`` imported, or ``module:attr.attr`` imported and called."""
    for entry in entries:
        name, _, attr = entry.partition(":")
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError:
            if missing_ok:
                continue
            raise
        if attr:
            for part in attr.split("."):
                obj = getattr(obj, part)
            obj()


FORKED_ACCEPT_TIMEOUT = 60.0  # seconds a forked executor waits for the judge before it gives up


def _preload(framework: str) -> None:
    """The zygote's imports: the adapter package (which imports the framework) and the framework modules
    its formats' loaders import on first use (``Adapter.preloaded``: torch.export.load pulls in sympy
    and Dynamo, 1.6 s), so that a forked executor does not import them again for every check."""
    module = importlib.import_module(f"layer_conformance.layerside.{framework}")
    # a module another version of the framework lacks: its executors import what they need then
    _import_or_call(getattr(module.FrameworkAdapter, "preloaded", ()), missing_ok=True)
    # the wire's bfloat16 (harness/wire.py): up to 0.5 s of its own import (ml_dtypes 0.7), once per run rather
    # than once per target in every forked process that meets a bfloat16 array (JAX and TensorFlow import it anyway)
    _import_or_call(["ml_dtypes"], missing_ok=True)


IDLE_WAIT = 0.05  # seconds without a request after which the zygote imports its next module


def _when_idle(framework: str) -> list:
    """(The zygote.) What it imports while no request waits: ``Adapter.preloaded_when_idle``."""
    module = sys.modules.get(f"layer_conformance.layerside.{framework}")
    return list(getattr(getattr(module, "FrameworkAdapter", None), "preloaded_when_idle", ()))


def _import_idle(name: str) -> None:
    """One module, imported only as a saving: one that fails (another version of the framework lacks it, or
    it needs a library not installed) is left to the processes that need it, and is no error here."""
    try:
        importlib.import_module(name)
    except Exception:
        pass


_ENDED: dict = {}  # (the zygote) pid -> wait status of children collected before the judge asked how they ended


def exit_status(pid: int, wait: float) -> int | None:
    """How the zygote's child ``pid`` ended: an exit code, or minus the signal that killed it; None while it runs
    past ``wait`` seconds, or for a pid that is not its child."""
    ends = time.monotonic() + wait
    while pid not in _ENDED:
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if got:
            _ENDED[pid] = status
        elif time.monotonic() > ends:
            return None
        else:
            time.sleep(0.02)
    status = _ENDED.pop(pid)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _reap() -> None:
    """Collect the zygote's ended children, keeping how each ended for the judge (``op_exit_status``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if len(_ENDED) > 4096:
            _ENDED.pop(next(iter(_ENDED)))
        _ENDED[pid] = status


def _leave_network() -> None:
    """(A process forked by the zygote, holding the judge's connection.) A user and network namespace of its
    own: no network but a loopback that is down; the connection made before stays open."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return  # the hello's `network` says what it kept
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError:
            pass


def _fork_listening(token: str, channel, isolate: bool = False) -> dict:
    """A child of this process that listens on a loopback port for one execnet socket gateway whose
    bootstrap carries ``token``, and serves it; {"pid", "port"}. The child never returns here."""
    import socket
    _reap()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _serve_forked(listener, token, channel, isolate)
            code = 0
        finally:
            os._exit(code)  # never back into the parent's loop, nor its atexit handlers
    port = listener.getsockname()[1]
    listener.close()
    return {"pid": pid, "port": port}


def _serve_forked(listener, token: str, zygote_channel, isolate: bool = False) -> None:
    """In the forked child: leave the zygote's pipes alone, take the judge's connection, serve it."""
    io = getattr(getattr(zygote_channel, "gateway", None), "_io", None)
    null = os.open(os.devnull, os.O_RDWR)
    # pipes (a process the judge started) or a socket (a zygote kept between runs)
    for f in (getattr(io, "infile", None), getattr(io, "outfile", None), getattr(io, "sock", None)):
        try:
            os.dup2(null, f.fileno())  # the zygote's line to the judge: nothing here may write to it
        except (AttributeError, OSError, ValueError):
            pass
    if _WARM_LISTENER is not None:
        _WARM_LISTENER.close()  # a kept zygote's door to later judges: never open to the code under test
    conn, address_line = _accept_with(listener, token, FORKED_ACCEPT_TIMEOUT)
    listener.close()
    if conn is None:
        return
    if isolate:
        _leave_network()  # a sandboxed run: the zygote's network was for this connection only
    _exec_bootstrap(conn, address_line)


_WARM_LISTENER = None  # (a kept zygote) the socket judges connect to: closed in every process it forks


def serve_warm() -> None:
    """(A zygote kept between runs, boundary/warm.py.) Read {"token", "idle_s"} on stdin, listen on a loopback
    port and say it on stdout; then serve each judge that connects with the token, one at a time, as the zygote
    of its run (``serve``: the first one's config imports the framework), until ``idle_s`` pass without one."""
    import json
    import socket
    global _WARM_LISTENER
    told = json.loads(sys.stdin.readline())
    listener = _WARM_LISTENER = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    sys.stdout.write(json.dumps({"port": listener.getsockname()[1]}) + "\n")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)  # nothing more to say to the judge that started it, which may be gone
    while True:
        conn, address = _accept_with(listener, told["token"], told["idle_s"])
        if conn is None:
            return  # idle too long: the zygote ends, and its namespace with it
        _exec_bootstrap(conn, address)  # returns when the judge closes its connection
        _reap()


def _accept_with(listener, token: str, timeout: float):
    """The next connection whose execnet bootstrap line carries ``token``, and that line; (None, None) after
    ``timeout`` seconds without one. A connection without the token is closed."""
    import socket
    ends = time.monotonic() + timeout
    while True:
        listener.settimeout(max(0.01, ends - time.monotonic()))
        try:
            conn, address = listener.accept()
        except socket.timeout:
            return None, None
        conn.settimeout(FORKED_ACCEPT_TIMEOUT)
        try:
            with conn.makefile("rb") as f:
                line = f.readline(1 << 24)  # execnet's bootstrap: the repr of its source, on one line
        except OSError:
            line = b""
        if token.encode() in line:
            conn.settimeout(None)
            return conn, (address, line)
        conn.close()


def _exec_bootstrap(conn, address_line) -> None:
    """Serve one execnet socket gateway on ``conn``: what execnet's own socketserver evals."""
    import ast
    address, line = address_line
    source = ast.literal_eval(line.decode().rstrip())
    try:
        exec(compile(source, "<executor>", "exec"), {"clientsock": conn, "address": address})
    finally:
        conn.close()
