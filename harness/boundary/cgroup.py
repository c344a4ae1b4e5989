"""An executor's cgroup (the judge's side of the sandbox, boundary/sandbox.py): v2, or v1's memory and pids
controllers, where this process may make groups. A group per executor process caps the memory and the number of
tasks of the process and everything it starts (tmpfs pages it writes included), and the whole group is killed when
the executor ends."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

PIDS_MAX = 4096  # tasks (processes and threads) per executor's group: a fork bomb stops there

_lock = threading.Lock()
_found: dict = {}   # "cgroup": what cgroup_root found, asked once per process


def cgroup_root() -> dict | None:
    """Where this process may make groups with a memory and a pids limit: {"v2": dir} or {"memory": dir,
    "pids": dir} (v1), or None."""
    with _lock:
        if "cgroup" not in _found:
            try:
                _found["cgroup"] = _find_cgroup()
            except OSError:
                _found["cgroup"] = None
        return _found["cgroup"]


def _own_groups() -> dict:
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    return out


def _usable(directory: str, files) -> bool:
    probe = os.path.join(directory, f"conformance-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return all(os.path.exists(os.path.join(probe, f)) for f in files)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def _find_cgroup() -> dict | None:
    own = _own_groups()
    base = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(base, "cgroup.controllers")) and "" in own:  # v2 alone
        d = base + own[""]
        return {"v2": d} if _usable(d, ("memory.max", "pids.max", "cgroup.procs")) else None
    mem, pids = os.path.join(base, "memory"), os.path.join(base, "pids")
    if "memory" in own and "pids" in own and os.path.isdir(mem) and os.path.isdir(pids):
        m = os.path.normpath(mem + own["memory"])
        p = os.path.normpath(pids + own["pids"])
        # inside a container the group paths may be the host's: the mount's root is then this container's group
        m = m if os.path.isdir(m) else mem
        p = p if os.path.isdir(p) else pids
        if _usable(m, ("memory.limit_in_bytes", "cgroup.procs")) and _usable(p, ("pids.max", "cgroup.procs")):
            return {"memory": m, "pids": p}
    return None


_counter = [0]


class Group:
    """One executor's cgroup(s): the process is moved in before it runs any code under test; its children
    follow it. ``kill`` ends every process in the group and removes it."""

    def __init__(self, dirs: list[str], memory_dir: str | None, v2: bool):
        self.dirs, self.memory_dir, self.v2 = dirs, memory_dir, v2
        self.oom_before = self.oom_kills()

    @classmethod
    def make(cls, root: dict, memory_limit_gib) -> Group | None:
        with _lock:
            _counter[0] += 1
            name = f"conformance-{os.getpid()}-{_counter[0]}"
        limit = int(memory_limit_gib * 2 ** 30) if memory_limit_gib else None
        made = []
        try:
            if "v2" in root:
                d = os.path.join(root["v2"], name)
                os.mkdir(d)
                made.append(d)
                _write(d, "pids.max", PIDS_MAX)
                if limit:
                    _write(d, "memory.max", limit)
                    with contextlib.suppress(OSError):
                        _write(d, "memory.swap.max", 0)
                return cls(made, d, True)
            m, p = os.path.join(root["memory"], name), os.path.join(root["pids"], name)
            os.mkdir(m)
            made.append(m)
            os.mkdir(p)
            made.append(p)
            _write(p, "pids.max", PIDS_MAX)
            if limit:
                _write(m, "memory.limit_in_bytes", limit)
                with contextlib.suppress(OSError):
                    _write(m, "memory.memsw.limit_in_bytes", limit)
            return cls(made, m, False)
        except OSError:
            for d in made:
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            return None

    def add(self, pid: int) -> bool:
        try:
            for d in self.dirs:
                _write(d, "cgroup.procs", pid)
            return True
        except OSError:
            return False

    def oom_kills(self) -> int:
        """How many processes of the group the kernel killed for its memory limit so far."""
        if not self.memory_dir:
            return 0
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            with open(os.path.join(self.memory_dir, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    @property
    def ran_out_of_memory(self) -> bool:
        return self.oom_kills() > self.oom_before

    def pids(self) -> list[int]:
        out = set()
        for d in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                with open(os.path.join(d, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
        return sorted(out)

    def kill(self):
        """Every process in the group ends (a process forking as it is killed is caught by the next pass)."""
        if self.v2 and os.path.exists(os.path.join(self.dirs[0], "cgroup.kill")):
            with contextlib.suppress(OSError):
                _write(self.dirs[0], "cgroup.kill", 1)
        ended = time.monotonic() + 10
        while time.monotonic() < ended:
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for d in self.dirs:
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _write(d: str, name: str, value) -> None:
    with open(os.path.join(d, name), "w") as f:
        f.write(str(value))
