"""The executors' sandbox (the judge's side): Linux namespaces through util-linux ``unshare``, and a cgroup
per executor where one can be had.

An executor process started by the judge runs as pid 1 of its own user, mount and PID namespaces: every
mount read-only (the project, site-packages, the whole file system) but a private /tmp and /dev/shm and
the judge's shared directory (``shared_dir``: the files the judge hands an executor), locked by a nested
user namespace; no network (a network namespace whose loopback is down) for the executors that need no
connection from the judge. It cannot see or signal the judge, and every process it starts dies with it:
the kernel kills a PID namespace's processes when its pid 1 ends, and ``unshare --kill-child`` ends pid 1
when the judge kills ``unshare``. The zygote (reached over loopback TCP by the processes it forks) keeps
the judge's network namespace; a process it forks takes a network namespace of its own once it holds
the judge's connection (layerside/server.py).

A cgroup (v2, or v1's memory and pids controllers) per executor process caps the memory and the number of
tasks of the process and everything it starts, /dev/shm and /tmp included (tmpfs pages are charged to
the group), and the whole group is killed when the executor ends.

Modes (--sandbox): ``auto`` (the default: what can be had, else none, said once), ``require`` (a usage
error where no namespaces can be had), ``off``. ``describe()``: ``namespaces+cgroup``, ``namespaces`` or
``none: <why>``.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time

UNSHARE_ENV = "LAYER_CONFORMANCE_UNSHARE"  # the unshare binary (default: the one on PATH); tests point it away
PIDS_MAX = 4096  # tasks (processes and threads) per executor's group: a fork bomb stops there

# run as pid 1 of the new namespaces: sh -c SCRIPT sandbox UNSHARE SHARED KEPT PROGRAM ARGS...
# KEPT: the directories under /tmp an executor reads (the project, its import paths), one a line: they stay
# visible, read-only, in the private /tmp
_INIT = r"""set -e
unshare_bin=$1; shared=$2; kept=$3; shift 3
mount -n -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir /dev/shm/.shared /dev/shm/.kept
mount -n --bind "$shared" /dev/shm/.shared
n=0
printf '%s\n' "$kept" | while IFS= read -r k; do
    [ -n "$k" ] || continue
    n=$((n + 1)); mkdir "/dev/shm/.kept/$n"
    # a directory that went away since the judge listed /tmp (another program's temporary one) is skipped
    mount -n --rbind "$k" "/dev/shm/.kept/$n" 2>/dev/null || rmdir "/dev/shm/.kept/$n"
done
awk '{print $5}' /proc/self/mountinfo | while read -r m; do
    case "$m" in
        /proc|/proc/*|/dev/shm|/dev/shm/.shared) ;;
        *) mount -n -o remount,bind,ro "$m" 2>/dev/null || true ;;
    esac
done
mount -n -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p "$shared"
mount -n --move /dev/shm/.shared "$shared"
n=0
printf '%s\n' "$kept" | while IFS= read -r k; do
    [ -n "$k" ] || continue
    n=$((n + 1)); [ -d "/dev/shm/.kept/$n" ] || continue
    # a directory deleted since it was bound cannot be moved (ENOENT): it is dropped, not the executor's start
    mkdir -p "$k" 2>/dev/null && mount -n --move "/dev/shm/.kept/$n" "$k" 2>/dev/null ||
        umount -n -l "/dev/shm/.kept/$n" 2>/dev/null || true
done
rmdir /dev/shm/.kept/* /dev/shm/.kept /dev/shm/.shared 2>/dev/null || true
export TMPDIR=/tmp
set +e
# the executor is this shell's child, not pid 1 (which ignores the signals it sends itself: os.abort() would
# end as SIGSEGV); its end is this shell's, and so the namespace's: its status is passed on (128 + signal)
"$unshare_bin" --user --map-root-user --mount -- "$@"
exit $?
"""

MODES = ("auto", "require", "off")
MODE = "auto"  # the mode of executors made without one (the run's, once ``configure`` set it)

_lock = threading.Lock()
_state: dict = {}


class Unavailable(Exception):
    """--sandbox require, where no sandbox can be had (a usage error)."""


def configure(mode: str | None) -> Sandbox:
    """The run's sandbox (--sandbox): the mode every executor of this process gets; ``require`` raises
    ``Unavailable`` where executors cannot run in namespaces."""
    global MODE
    MODE = mode or "auto"
    box = sandbox(MODE)
    if MODE == "require" and not box.namespaces:
        raise Unavailable(f"--sandbox require: no sandbox can be had here ({box.why})")
    return box


def _unshare() -> str | None:
    name = os.environ.get(UNSHARE_ENV) or shutil.which("unshare")
    return name if name and os.path.isfile(name) and os.access(name, os.X_OK) else None


def namespaces_problem() -> str | None:
    """Why executors cannot run in namespaces here, or None (asked once: a test run of the set-up)."""
    with _lock:
        if "ns" not in _state:
            _state["ns"] = _probe_namespaces()
        return _state["ns"]


def _probe_namespaces() -> str | None:
    import sys
    if not sys.platform.startswith("linux"):
        return f"no Linux namespaces on {sys.platform}"
    unshare = _unshare()
    if unshare is None:
        return f"no unshare binary ({os.environ.get(UNSHARE_ENV) or 'util-linux unshare not on PATH'})"
    try:
        done = subprocess.run(_prefix(unshare, shared_dir(), net=True) + ["true"], capture_output=True,
                              timeout=30, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare cannot run: {exc}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"unshare cannot make user, mount, PID and network namespaces: {said}"
    return None


def _prefix(unshare: str, shared: str, net: bool, kept=()) -> list[str]:
    return ([unshare, "--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
            + (["--net"] if net else []) + ["sh", "-c", _INIT, "sandbox", unshare, shared, "\n".join(kept)])


def kept_under_tmp(paths) -> list[str]:
    """Of ``paths``, the existing directories under /tmp (which the sandbox's private /tmp would hide), none
    inside another."""
    out = []
    real = {os.path.realpath(p) for p in paths if p}
    # every directory at the top of the host's /tmp stays readable (read-only): an environment, a checkout or a
    # project there (a CI workspace, a filtered site-packages of links) is found however it is reached; writes
    # still land in the private /tmp alone. The judges' own shared directories are mounted on their own.
    with contextlib.suppress(OSError):
        real.update(e.path for e in os.scandir("/tmp")
                    if e.is_dir(follow_symlinks=False) and not e.name.startswith("conformance-sandbox-"))
    for p in list(real):   # an import directory of symbolic links (a filtered site-packages): their targets too
        if p.startswith("/tmp/") and os.path.isdir(p):
            with contextlib.suppress(OSError):
                real.update(os.path.dirname(os.path.realpath(e.path)) for e in os.scandir(p) if e.is_symlink())
    for p in sorted(real):
        if (p.startswith("/tmp/") and "\n" not in p and os.path.isdir(p)
                and not any(p.startswith(k + "/") for k in out)):
            out.append(p)
    return out


def keep_shared() -> None:
    """(--keep-warm) The shared directory is the user's lasting one: a zygote kept from an earlier run has it
    mounted, and this run's files must reach the processes it forks. Mode 0700, the user's, no link; where
    that cannot be had, the run's own (and its zygotes are kept for no later run, whose key differs)."""
    import stat
    if "shared" in _state or not os.path.isdir("/tmp"):
        return
    path = f"/tmp/conformance-sandbox-warm-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
        _state["shared"] = path


def shared_dir() -> str:
    """The judge's directory (under /tmp) for the files it hands executors, writable inside the sandbox at
    the same path; removed when the judge exits."""
    if "shared" not in _state:
        base = "/tmp" if os.path.isdir("/tmp") else None
        _state["shared"] = tempfile.mkdtemp(prefix="conformance-sandbox-", dir=base)
        atexit.register(shutil.rmtree, _state["shared"], True)
    return _state["shared"]


class Sandbox:
    """The sandbox a run's executors get: ``mode`` as asked, what it has (``namespaces``, ``cgroup``), and
    ``why`` where it has none."""

    def __init__(self, mode: str = "auto"):
        self.mode = mode
        self.namespaces = False
        self.cgroup = None
        self.why = ""
        if mode == "off":
            self.why = "--sandbox off"
            return
        problem = namespaces_problem()
        if problem:
            self.why = problem
            return  # a cgroup alone is no sandbox to speak of: without namespaces, none
        else:
            self.namespaces = True
        self.cgroup = cgroup_root()

    def describe(self) -> str:
        if self.namespaces:
            return "namespaces+cgroup" if self.cgroup else "namespaces"
        return f"none: {self.why}"

    def use(self):
        """An executor starts in this sandbox: the judge's temporary files from now on (stderr and stack files,
        compilation caches, export directories) are made where the executors reach them."""
        if self.namespaces:
            tempfile.tempdir = shared_dir()

    def command(self, python: str, role: str, reads=()) -> str:
        """The execnet ``python=`` of an executor started in this sandbox (or ``python`` unchanged); ``reads``:
        the directories it imports from (those under /tmp stay visible)."""
        if not self.namespaces:
            return python
        # the zygote stays reachable over loopback; it runs no code under test, and what it forks leaves the
        # network once connected
        net = role != "zygote"
        program = shlex.split(python)
        kept = kept_under_tmp(list(reads) + [os.path.dirname(os.path.dirname(os.path.abspath(program[0])))])
        return shlex.join(_prefix(_unshare(), shared_dir(), net, kept) + program)

    def group(self, memory_limit_gib) -> Group | None:
        """A new cgroup for one executor process (None where the sandbox has none)."""
        return Group.make(self.cgroup, memory_limit_gib) if self.cgroup else None


_sandboxes: dict[str, Sandbox] = {}


_making = threading.Lock()


def sandbox(mode: str = "auto") -> Sandbox:
    """The sandbox of ``mode`` (auto, require, off), found out once per judge process."""
    with _making:
        if mode not in _sandboxes:
            _sandboxes[mode] = Sandbox(mode)
        return _sandboxes[mode]


# -- cgroups ------------------------------------------------------------------------------------------
def cgroup_root() -> dict | None:
    """Where this process may make groups with a memory and a pids limit: {"v2": dir} or {"memory": dir,
    "pids": dir} (v1), or None."""
    with _lock:
        if "cgroup" not in _state:
            try:
                _state["cgroup"] = _find_cgroup()
            except OSError:
                _state["cgroup"] = None
        return _state["cgroup"]


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


# -- host pids -------------------------------------------------------------------------------------------
def process_state(pid: int) -> str | None:
    """The state letter of a process in /proc (R, S, D, Z, T stopped by a signal, t stopped by a tracer), or
    None where there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _status(pid: int) -> dict:
    out = {}
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                out[key] = value.split()
    return out


def host_pid(parent: int, ns_pid: int | None = None, timeout: float = 5.0) -> int | None:
    """The pid, as this process sees it, of a child of ``parent`` (a host pid) whose pid in its own namespace
    is ``ns_pid`` (any child where None): an executor in a PID namespace says 1, or its zygote's number."""
    ended = time.monotonic() + timeout
    while True:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            st = _status(int(entry))
            if st.get("PPid") != [str(parent)]:
                continue
            if ns_pid is None or (st.get("NSpid") or [""])[-1] == str(ns_pid):
                return int(entry)
        if time.monotonic() >= ended:
            return None
        time.sleep(0.01)
