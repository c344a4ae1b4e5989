"""The executors' sandbox (the judge's side): Linux namespaces through util-linux ``unshare`` (and ``nsenter``,
``setpriv``), and a cgroup per executor where one can be had.

An executor process started by the judge runs as pid 1 of its own user, mount and PID namespaces: every
mount read-only (the project, site-packages, the whole file system) but a private /tmp and /dev/shm and
the judge's shared directory (``shared_dir``: the files the judge hands an executor), locked by a nested
user namespace; no network (a network namespace whose loopback is down) for the executors that need no
connection from the judge. It cannot see or signal the judge, and every process it starts dies with it:
the kernel kills a PID namespace's processes when its pid 1 ends, and ``unshare --kill-child`` ends pid 1
when the judge kills ``unshare``. The zygote (reached over loopback TCP by the processes it forks) keeps
the judge's network namespace; a process it forks takes a network namespace of its own once it holds
the judge's connection (layerside/server.py).

The code it runs holds no capability over the sandbox's namespaces and cannot gain one (``setpriv
--no-new-privs``, empty bounding, inheritable and ambient sets; a user namespace it makes itself, as a forked
process does for its network, gives it capabilities over that namespace alone, whose mounts are all locked):
where the judge is root it keeps uid 0 (so that it reads what the judge reads: a project in a home of mode 0700,
pytest's temporary directories) but none of root's powers; /proc/sys and /proc/sysrq-trigger are read-only (a
uid-0 process writes them by its uid alone).
Of the host's /tmp only the directories it imports from are mounted (read-only); the registry of kept
zygotes (boundary/warm.py) is covered by an empty directory.

The shared directory is a tmpfs of its own, capped at the run's --memory-limit: the judge starts one small
process per run (the *holder*) in a user and mount namespace of its own, which mounts it; every executor's
namespaces are made from the holder's (``nsenter``), and the judge reaches the tmpfs through the holder's root
(``/proc/PID/root``): on the host the shared directory is a symbolic link to it, at the same path the
executors see. A tmpfs's pages are charged to the cgroup of the process that writes them. The holder ends with
the judge (its stdin closes). With --keep-warm a holder outlives the run with the kept zygotes (one per user and
registry, found again by the next run; it ends when none of the processes it was told about is alive, or at ``warm
--stop``); each run works in a directory of its own in it, and what earlier runs left is removed at its start.

A cgroup (v2, or v1's memory and pids controllers) per executor process caps the memory and the number of
tasks of the process and everything it starts, /dev/shm, /tmp and the shared directory included (tmpfs pages
are charged to the group), and the whole group is killed when the executor ends (boundary/cgroup.py).

Modes (--sandbox): ``auto`` (the default: what can be had, else none, said once), ``require`` (a usage
error where no namespaces can be had), ``off``. ``describe()``: ``namespaces+cgroup``, ``namespaces`` or
``none: <why>``.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from .cgroup import Group, cgroup_root
# host_pid and process_state are asked of this module too (client.py, warm.py): the sandbox's readers of /proc
from .procfs import host_pid, process_state, stat_field  # noqa: F401

UNSHARE_ENV = "LAYER_CONFORMANCE_UNSHARE"  # the unshare binary (default: the one on PATH); tests point it away

# run as pid 1 of the new namespaces: sh -c SCRIPT sandbox UNSHARE SETPRIV SOURCE SHARED KEPT PROGRAM ARGS...
# SOURCE: the holder's tmpfs (as the holder's namespace names it), mounted at SHARED (the judge's path for it);
# KEPT: the directories under /tmp an executor reads (the project, its import paths), one a line: they stay
# visible, read-only, in the private /tmp (with what the holder mounted in them: the registry's cover);
# SETPRIV: empty where there is none (then the program keeps the innermost namespace's capabilities)
_INIT = r"""set -e
unshare_bin=$1; setpriv_bin=$2; source=$3; shared=$4; kept=$5; shift 5
mount -n -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir /dev/shm/.shared /dev/shm/.kept
mount -n --bind "$source" /dev/shm/.shared
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
# what a uid-0 process may write in /proc by its uid alone (core_pattern's pipe runs as the host's root)
for p in /proc/sys /proc/sysrq-trigger; do
    [ -e "$p" ] && mount -n --bind -o ro "$p" "$p"
done
export TMPDIR=/tmp
set +e
# the executor is this shell's child, not pid 1 (which ignores the signals it sends itself: os.abort() would
# end as SIGSEGV); its end is this shell's, and so the namespace's: its status is passed on (128 + signal)
if [ -n "$setpriv_bin" ]; then
    "$unshare_bin" --user --map-root-user --mount -- \
        "$setpriv_bin" --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
else
    "$unshare_bin" --user --map-root-user --mount -- "$@"
fi
exit $?
"""

# the holder of a run's shared directory: sh -c SCRIPT holder BASE WARM HIDDEN. It mounts the tmpfs on BASE (in
# its own mount namespace: on the host BASE stays an empty directory), with SHARED (the executors') and PRIVATE
# (its own) in it, covers each directory of HIDDEN (one a line: the warm registry) with an empty one (every
# executor's namespaces are copies of its own), says so, and waits: for its stdin to close (a run's: the judge
# ended), or (WARM) until none of the processes named in PRIVATE/pids is alive
_HOLD = r"""set -e
base=$1; warm=$2; hidden=$3
mount -n -t tmpfs -o mode=0711,nosuid,nodev tmpfs "$base"
printf '%s\n' "$hidden" | while IFS= read -r h; do
    [ -n "$h" ] && [ -d "$h" ] || continue
    mount -n -t tmpfs -o ro,mode=0,size=4k,nosuid,nodev,noexec tmpfs "$h"
done
mkdir -m 0777 "$base/shared"
mkdir -m 0700 "$base/private"
: > "$base/private/pids"
echo ready
set +e
if [ -z "$warm" ]; then
    while read -r _; do :; done
    exit 0
fi
exec </dev/null >/dev/null 2>&1
sleep 30
while :; do
    alive=
    for p in $(cat "$base/private/pids"); do
        [ -d "/proc/$p" ] && { alive=1; break; }
    done
    [ -n "$alive" ] || exit 0
    sleep 5
done
"""
HOLDER_MARK = "conformance-holder"  # the holder's argv[0]: how its pid is known for one (not a reused number)

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


def _tool(name: str) -> str | None:
    """util-linux's ``nsenter`` or ``setpriv``: beside the unshare in use, else on PATH."""
    unshare = _unshare()
    for d in ([os.path.dirname(unshare)] if unshare else []) + [None]:
        path = os.path.join(d, name) if d else shutil.which(name)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


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
    if _tool("nsenter") is None:
        return "no nsenter binary (util-linux nsenter not on PATH)"
    try:
        holder = _holder()
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        return f"unshare cannot make the shared directory's user and mount namespaces: {exc}"
    try:
        done = subprocess.run(_prefix(unshare, holder, net=True) + ["true"], capture_output=True,
                              timeout=30, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare cannot run: {exc}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"unshare cannot make user, mount, PID and network namespaces: {said}"
    return None


def _prefix(unshare: str, holder: dict, net: bool, kept=()) -> list[str]:
    """The command before an executor's program: into the holder's namespaces, then namespaces of its own."""
    return ([_tool("nsenter"), f"--target={holder['pid']}", "--user", "--mount", "--preserve-credentials", "--",
             unshare, "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]
            + (["--net"] if net else [])
            + ["sh", "-c", _INIT, "sandbox", unshare, _tool("setpriv") or "", holder["source"], holder["shared"],
               "\n".join(kept)])


def warm_registry() -> Path:
    """The user's directory of kept zygotes (``boundary.warm``): one ``KEY.json`` (how to reach it) and ``KEY.lock``
    each; made where missing, readable by its owner only."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "layer-conformance" / "warm"
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _hidden() -> list[str]:
    """The directories no executor may read: the registry of kept zygotes (their ports and tokens)."""
    with contextlib.suppress(OSError):
        path = str(warm_registry())   # made now where missing: one made later would be visible
        if "\n" not in path:
            return [path]
    return []


def kept_under_tmp(paths) -> list[str]:
    """Of ``paths``, the existing directories under /tmp (which the sandbox's private /tmp would hide), none
    inside another. No other directory of the host's /tmp is mounted: another job's files stay out of reach."""
    out = []
    real = {os.path.realpath(p) for p in paths if p}
    for p in list(real):   # an import directory of symbolic links (a filtered site-packages): their targets too
        if p.startswith("/tmp/") and os.path.isdir(p):
            with contextlib.suppress(OSError):
                real.update(os.path.dirname(os.path.realpath(e.path)) for e in os.scandir(p) if e.is_symlink())
    for p in sorted(real):
        if (p.startswith("/tmp/") and "\n" not in p and os.path.isdir(p)
                and not p.startswith("/tmp/conformance-sandbox-")   # the shared directories: mounted on their own
                and not any(p.startswith(k + "/") for k in out)):
            out.append(p)
    return out


# -- the shared directory ----------------------------------------------------------------------------------
def keep_shared() -> None:
    """(--keep-warm) The shared directory outlives the run: a zygote kept from an earlier run has it mounted, and
    this run's files must reach the processes it forks. Its holder is the user's lasting one (found again by the
    next run); this run works in a directory of its own in it, and removes what earlier runs left."""
    _state.setdefault("warm", True)


def _warm_base() -> str | None:
    """The user's lasting directory (mode 0700, theirs, no link) on whose path the warm holder mounts its tmpfs."""
    import stat
    if not os.path.isdir("/tmp"):
        return None
    path = _warm_path()
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
        return path
    return None


def _warm_path() -> str:
    """One lasting directory per user and registry of kept zygotes (``warm --stop`` ends that registry's)."""
    import hashlib
    registry = os.path.realpath(str(warm_registry()))
    return f"/tmp/conformance-sandbox-warm-{os.getuid()}-{hashlib.sha256(registry.encode()).hexdigest()[:12]}"


def _start_time(pid: int) -> str | None:
    return stat_field(pid, 19)


def _is_holder(info: dict) -> bool:
    """``info`` ({"pid", "start", "base"}) names a holder that runs, with its tmpfs reachable."""
    pid = info.get("pid")
    if not isinstance(pid, int) or _start_time(pid) != info.get("start"):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if HOLDER_MARK.encode() not in f.read().split(b"\0"):
                return False
        return os.path.isdir(f"/proc/{pid}/root{info['base']}/private")
    except OSError:
        return False


def _launch_holder(base: str, warm: bool) -> subprocess.Popen:
    unshare = _unshare()
    if unshare is None:
        raise RuntimeError("no unshare binary")
    proc = subprocess.Popen([unshare, "--user", "--map-root-user", "--mount", "--propagation", "private", "--",
                             "sh", "-c", _HOLD, HOLDER_MARK, base, "warm" if warm else "", "\n".join(_hidden())],
                            stdin=subprocess.DEVNULL if warm else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=warm, close_fds=True,
                            env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"})
    line = proc.stdout.readline()
    proc.stdout.close()
    if line.strip() != b"ready":
        with contextlib.suppress(OSError):
            proc.kill()
        said = proc.stderr.read().decode(errors="replace").strip().splitlines()
        proc.wait()
        raise RuntimeError(said[-1] if said else f"exit status {proc.returncode}")
    if warm:
        proc.stderr.close()
        proc.returncode = 0  # the user's until it ends (no ResourceWarning): never waited for here
    return proc


def _holder() -> dict:
    """The run's holder of the shared directory, made once: {"pid", "base", "source", "shared", "tempdir"} (source:
    the tmpfs's directory as the holder's namespace names it; shared: the path the judge and the executors use)."""
    with _holding:
        if "holder" not in _state:
            _state["holder"] = _make_holder()
        return _state["holder"]


_holding = threading.RLock()


def _make_holder() -> dict:
    base = _warm_base() if _state.get("warm") else None
    if base is not None:
        return _warm_holder(base)
    base = tempfile.mkdtemp(prefix="conformance-sandbox-", dir="/tmp" if os.path.isdir("/tmp") else None)
    try:
        proc = _launch_holder(base, warm=False)
    except BaseException:
        os.rmdir(base)
        raise
    holder = {"pid": proc.pid, "start": _start_time(proc.pid), "base": base, "source": f"{base}/shared",
              "shared": f"{base}/shared", "proc": proc}
    os.symlink(f"/proc/{proc.pid}/root{base}/shared", holder["shared"])
    holder["tempdir"] = holder["shared"]
    atexit.register(_end_holder, holder)
    return holder


def _end_holder(holder: dict) -> None:
    """The run is over: its holder ends (its tmpfs goes with the last namespace that has it), the link goes."""
    proc = holder.get("proc")
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.close()
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)
    with contextlib.suppress(OSError):
        proc.stderr.close()
    with contextlib.suppress(OSError):
        os.unlink(holder["shared"])
    with contextlib.suppress(OSError):
        os.rmdir(holder["base"])


def _warm_holder(base: str) -> dict:
    """(--keep-warm) The user's lasting holder, found again or started; this run's pid told to it (it lives while
    a run or a kept zygote does), what earlier runs left in it removed, and a directory of this run's own."""
    import fcntl
    fd = os.open(f"{base}/holder.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        info = {}
        with contextlib.suppress(OSError, ValueError):
            with open(f"{base}/holder.json") as f:
                info = json.load(f)
        if not _is_holder(info):
            _clear_links(base)
            proc = _launch_holder(base, warm=True)
            info = {"pid": proc.pid, "start": _start_time(proc.pid), "base": base}
            tmp = f"{base}/holder.json.tmp"
            with open(tmp, "w") as f:
                json.dump(info, f)
            os.replace(tmp, f"{base}/holder.json")
        inside = f"/proc/{info['pid']}/root{base}"
        _tell_holder(info, os.getpid())
        # what earlier runs left (a layer's files included) goes; a run going on now keeps its own directory
        for entry in os.scandir(f"{inside}/shared"):
            live = entry.name.startswith("run-") and entry.name.split("-")[1].isdigit() and \
                _alive(int(entry.name.split("-")[1])) and entry.is_dir(follow_symlinks=False)
            if not live:
                _remove(entry.path)
        shared = f"{base}/shared-{info['pid']}"
        if os.path.realpath(shared) != os.path.realpath(f"{inside}/shared"):
            _clear_links(base)
            os.symlink(f"{inside}/shared", shared)
        own = tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=shared)
    finally:
        os.close(fd)
    atexit.register(_remove, own)
    return {**info, "source": f"{base}/shared", "shared": shared, "tempdir": own}


def _alive(pid: int) -> bool:
    return process_state(pid) not in (None, "Z")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _clear_links(base: str) -> None:
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.name.startswith("shared-") and entry.is_symlink():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _tell_holder(info: dict, pid: int) -> None:
    """(A warm holder) ``pid`` is one it lives for (a run's judge, a kept zygote's root)."""
    with open(f"/proc/{info['pid']}/root{info['base']}/private/pids", "a") as f:
        f.write(f"{pid}\n")


def hold_for(pid: int) -> None:
    """(--keep-warm) A kept zygote was started (``pid``, its root): the warm holder lives at least as long."""
    holder = _state.get("holder")
    if holder and holder["shared"] != holder["source"]:
        with contextlib.suppress(OSError):
            _tell_holder(holder, pid)


def stop_warm() -> bool:
    """(``warm --stop``) The user's lasting holder ends, with what its directory holds; whether there was one."""
    base = _warm_path()
    info = {}
    with contextlib.suppress(OSError, ValueError):
        with open(f"{base}/holder.json") as f:
            info = json.load(f)
    found = _is_holder(info)
    if found:
        inside = f"/proc/{info['pid']}/root{base}/shared"
        with contextlib.suppress(OSError):
            for entry in os.scandir(inside):
                _remove(entry.path)
        with contextlib.suppress(OSError):
            # its group (its own session): the holder and the sleep it waits in
            if os.getpgid(info["pid"]) == info["pid"]:
                os.killpg(info["pid"], signal.SIGKILL)
            else:
                os.kill(info["pid"], signal.SIGKILL)
    _clear_links(base)
    # what is left on the host's disk (the lock, a stale link) goes, and the directory with it
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            _remove(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(base)
    return found


def _resize(holder: dict, memory_limit_gib) -> None:
    """The tmpfs's size: the run's --memory-limit (0: no cap but the kernel's, half the memory). (With its source
    named and no options read back from the mount table: the table's uid= and gid=, in the host's numbers, are
    refused in a user namespace.)"""
    size = f"{max(1, int(memory_limit_gib * 2 ** 20))}k" if memory_limit_gib else "50%"
    if holder.get("size") == size:
        return
    done = subprocess.run([_tool("nsenter"), f"--target={holder['pid']}", "--user", "--mount",
                           "--preserve-credentials", "--", "mount", "-n", "--options-source=disable", "-o",
                           f"remount,nosuid,nodev,size={size}", "tmpfs", holder["base"]],
                          capture_output=True, timeout=30)
    if done.returncode == 0:
        holder["size"] = size


def shared_dir() -> str:
    """The judge's directory (under /tmp) for the files it hands executors, writable inside the sandbox at
    the same path: the holder's tmpfs (on the host, a link to it); gone when the judge exits."""
    return _holder()["shared"]


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

    def use(self, memory_limit_gib=None):
        """An executor starts in this sandbox: the judge's temporary files from now on (stderr and stack files,
        compilation caches, export directories) are made where the executors reach them, in the shared tmpfs,
        which is capped at ``memory_limit_gib`` (the run's --memory-limit)."""
        if self.namespaces:
            holder = _holder()
            tempfile.tempdir = holder["tempdir"]
            if memory_limit_gib is not None:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    _resize(holder, memory_limit_gib)

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
        return shlex.join(_prefix(_unshare(), _holder(), net, kept) + program)

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
