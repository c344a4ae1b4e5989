"""``--keep-warm``: a framework's zygote kept running between runs, for the inner loop.

A run imports each framework once, in its zygote (session.py). With ``--keep-warm`` the zygote outlives the
run: it waits, in its own sandbox and session, for the next run's judge to connect, and exits after
``--keep-warm`` seconds without one. The next run with the same Python, framework, working directory, import
path, sandbox, memory limit and harness code forks its executors from it and skips the import.

The user owns it: nothing outlives a run without the flag, each run that leaves one running names it with
how to stop it (``python -m layer_conformance warm --stop``), and its registry is a directory of the user's
(mode 0700), which no executor can read (the sandbox covers it with an empty directory). The shared directory
the zygotes and the judges use is a tmpfs of its own, emptied at each run's start and at ``warm --stop``
(sandbox.py). Only the judge that holds a zygote's lock uses it; a second run at the same time starts its own.
A zygote runs no code under test, but the processes forked from it share its PID namespace, so a hostile
layer could reach a warm zygote that later runs fork from: keep it warm for your own layers, not in a gate.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

# registry: the user's directory of warm zygotes, one ``KEY.json`` (how to reach it) and ``KEY.lock`` each; defined
# beside the sandbox, which hides it from every executor (this module imports the sandbox, not the other way round)
from .sandbox import process_state, warm_registry as registry

DEFAULT_SECONDS = 600.0  # how long a kept zygote waits for the next run
ENTRY = "from layer_conformance.layerside.server import serve_warm; serve_warm()"


def _code_stamp() -> str:
    """The harness's own code, by file size and time: an edited harness never serves from an older zygote."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            st = p.stat()
            h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def key(framework: str, python: str, memory_limit_gib, sandbox: str, path: list[str]) -> str:
    """What a zygote must share with a run to serve it: a fork inherits all of it."""
    said = {"framework": framework, "python": os.path.realpath(python), "cwd": os.getcwd(), "path": path,
            "memory_limit_gib": memory_limit_gib, "sandbox": sandbox, "code": _code_stamp(),
            "pythonpath": os.environ.get("PYTHONPATH", "")}
    return f"{framework}-" + hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()[:16]


def _alive(pid: int | None) -> bool:
    return bool(pid) and process_state(pid) not in (None, "Z")


class Warm:
    """One kept zygote as a run holds it: ``info`` says how to reach it ({"port", "token", "root_pid",
    "framework", "idle_s"}); ``reused`` whether an earlier run left it; the lock is this run's until ``release``."""

    def __init__(self, name: str, info: dict, lock_fd: int, reused: bool):
        self.name, self.info, self.lock_fd, self.reused = name, info, lock_fd, reused

    @property
    def root_pid(self) -> int:
        return self.info["root_pid"]

    def host_pid(self, namespaces: bool) -> int | None:
        """The zygote's own pid, as the judge sees it: in a sandbox, unshare's child's child (sandbox.py)."""
        if "host_pid" not in self.info:
            from .sandbox import host_pid
            pid = self.root_pid
            if namespaces:
                init = host_pid(pid)
                pid = host_pid(init) if init else None
            self.info["host_pid"] = pid
        return self.info["host_pid"]

    def answers(self, namespaces: bool) -> bool:
        """Alive and not stopped: a connection to a stopped zygote would wait for ever."""
        pids = {self.root_pid, self.host_pid(namespaces)}
        return all(p and process_state(p) not in (None, "Z", "T", "t") for p in pids)

    def forget(self):
        """It does not answer (stopped, or gone): ended, and out of the registry."""
        stop_pid(self.root_pid)
        with contextlib.suppress(OSError):
            (registry() / f"{self.name}.json").unlink()

    def release(self):
        if self.lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.lock_fd)
            self.lock_fd = None


def take(name: str) -> tuple[int | None, dict | None]:
    """This run's lock on the zygote ``name`` (None where another run holds it) and its registry entry, if
    one is alive."""
    reg = registry()
    fd = os.open(reg / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None, None
    try:
        info = json.loads((reg / f"{name}.json").read_text())
    except (OSError, ValueError):
        return fd, None
    if not _alive(info.get("root_pid")):
        with contextlib.suppress(OSError):
            (reg / f"{name}.json").unlink()
        return fd, None
    return fd, info


def launch(name: str, framework: str, command: list[str], idle_s: float, lock_fd: int) -> Warm:
    """A new zygote that outlives this run: started in a session of its own (Ctrl-C in the terminal does not
    reach it), told its token on stdin, it answers the loopback port it listens on."""
    token = secrets.token_hex(16)
    proc = subprocess.Popen(command + ["-c", ENTRY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    proc.stdin.write((json.dumps({"token": token, "idle_s": idle_s}) + "\n").encode())
    proc.stdin.close()
    line = proc.stdout.readline()  # the port, once it listens (before its framework import)
    proc.stdout.close()
    try:
        said = json.loads(line)
    except ValueError:
        with contextlib.suppress(OSError):
            proc.kill()
        raise RuntimeError(f"the warm zygote did not start (exit {proc.poll()})") from None
    info = {"port": said["port"], "token": token, "root_pid": proc.pid, "framework": framework,
            "idle_s": idle_s, "started": time.time()}
    path = registry() / f"{name}.json"
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)
    from .sandbox import hold_for
    hold_for(proc.pid)  # the shared directory's holder lives at least as long as the zygote
    proc.returncode = 0  # never waited for here: it is the user's until it exits (no ResourceWarning)
    return Warm(name, info, lock_fd, reused=False)


def stop_pid(pid: int | None) -> None:
    """End a kept zygote: its root (unshare, whose namespace dies with it; or the zygote itself)."""
    if pid and _alive(pid) and _ours(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _ours(pid: int) -> bool:
    """The pid still names a kept zygote (not a process that got the number since)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"serve_warm" in f.read()
    except OSError:
        return False


def listing() -> list[dict]:
    """Every kept zygote that runs: {"name", "framework", "root_pid", "idle_s", "started"}."""
    out = []
    for p in sorted(registry().glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(p.read_text())
            if _alive(info.get("root_pid")) and _ours(info["root_pid"]):
                out.append({"name": p.stem, **{k: info.get(k) for k in ("framework", "root_pid", "idle_s",
                                                                           "started")}})
    return out


def stop_all() -> list[dict]:
    """End every kept zygote of this user, and the holder of their shared directory with what it holds; the
    zygotes ended."""
    from .sandbox import stop_warm
    ended = listing()
    for z in ended:
        stop_pid(z["root_pid"])
    for p in registry().glob("*.json"):
        with contextlib.suppress(OSError):
            p.unlink()
    stop_warm()
    return ended


def command_line() -> str:
    return f"{shlex.quote(os.path.basename(sys.executable))} -m layer_conformance warm --stop"
