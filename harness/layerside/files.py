"""The files the code under test loads in an executor (``FileRecorder``, an audit hook): what --changed-since later
selects a binding by; and where the installation's and the system's own files lie, which are never the user's."""
from __future__ import annotations

import importlib.util
import os
import sys


FILES_CAP = 10_000  # the most files an executor reports (what --changed-since compares a baseline's run by)
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class FileRecorder:
    """The files the code under test loads (modules it imports, data it opens), seen by an audit hook (PEP 578)
    while ``on``: what --changed-since later selects a binding by (targets.select_changed), so that a dynamic
    import, a data file or a symbolic link is seen as well as a static import. The Python installation's own
    files, the harness's and the system's pseudo-files are left out; so is a file this process wrote before it
    read it (a temporary file of a check). A hostile layer can fake or hide events: only a baseline's (trusted)
    run is read back."""

    def __init__(self):
        self.on = False
        self.raw: dict = {}        # absolute path -> None, in the order seen (not yet checked)
        self.names: set = set()    # modules imported (an import from a cached .pyc opens no .py)
        self.written: set = set()
        self.files: dict = {}      # reported or to report: path -> None
        self.reported = 0
        self.truncated = False
        self.skip = _installation_dirs()
        self.system = _system_dirs()
        sys.addaudithook(self.hook)

    def hook(self, event, args):
        if not self.on or (event != "open" and event != "import"):
            return
        try:  # an audit hook that raises fails the call it audits: never
            if event == "import":
                if len(self.names) < FILES_CAP:
                    self.names.add(args[0])
                return
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return  # a file descriptor
            path = os.path.abspath(path)
            if path.startswith(self.skip):
                return
            if (any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITES)):
                if path not in self.raw and len(self.written) < FILES_CAP:
                    self.written.add(path)
            elif path not in self.written and path not in self.raw:
                if len(self.raw) < FILES_CAP:
                    self.raw[path] = None
                else:
                    self.truncated = True
        except Exception:
            pass

    def note_held(self) -> None:
        """Count the files this process maps or holds open now (/proc/self/maps, /proc/self/fd) as seen: what
        native code reads raises no audit event (safetensors' and torch.from_file's mmap, a file a C library
        keeps open). The system's and the installation's files (shared libraries) and files open for writing
        only are left out, as are, later, the judge's temporary files (plugin._loaded_table)."""
        on, self.on = self.on, False  # what this reads is the harness's
        try:
            for path in _held_files():
                if path.startswith(self.skip) or path.startswith(self.system) or path in self.written \
                        or path in self.raw:
                    continue
                if len(self.raw) >= FILES_CAP:
                    self.truncated = True
                    break
                self.raw[path] = None
        except Exception:
            pass
        finally:
            self.on = on

    def take(self) -> dict:
        """The files seen since the last ``take`` (a path and, where a symbolic link leads elsewhere, its
        target), those mapped or open now among them (note_held), and whether the list was cut at FILES_CAP."""
        self.note_held()
        on, self.on = self.on, False  # what this reads is the harness's
        try:
            raw, self.raw = list(self.raw), {}
            names, self.names = list(self.names), set()
            for name in names:
                module = sys.modules.get(name)
                try:
                    file = getattr(module, "__file__", None) if module is not None else None
                except Exception:
                    file = None
                if isinstance(file, str):
                    raw.append(os.path.abspath(file))
            for path in raw:
                if path.endswith(".pyc") and "__pycache__" in path:
                    try:
                        source = importlib.util.source_from_cache(path)
                    except ValueError:
                        source = None
                    if source and os.path.isfile(source):
                        path = source
                if path.startswith(self.skip) or not os.path.isfile(path) or _metadata(path):
                    continue  # directories, paths that never existed or are gone, packages' metadata
                for f in (path, os.path.realpath(path)):
                    if f not in self.files and not f.startswith(self.skip):
                        if len(self.files) >= FILES_CAP:
                            self.truncated = True
                            break
                        self.files[f] = None
            new = list(self.files)[self.reported:]
            self.reported = len(self.files)
            return {"files": new, "files_truncated": self.truncated}
        finally:
            self.on = on


def _held_files() -> list[str]:
    """The files this process maps (/proc/self/maps) or holds open for reading (/proc/self/fd), absolute paths in
    the order found; Linux only (elsewhere none)."""
    out: dict = {}
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                parts = line.rstrip(b"\n").split(None, 5)  # address perms offset dev inode [path]
                if len(parts) == 6 and parts[5].startswith(b"/"):
                    out[os.fsdecode(parts[5])] = None
    except OSError:
        pass
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            with open(f"/proc/self/fdinfo/{fd}") as f:
                flags = next((int(line.split()[1], 8) for line in f if line.startswith("flags:")), 0)
        except (OSError, ValueError, IndexError):
            continue  # closed meanwhile (this listing's own descriptor)
        if target.startswith("/") and flags & os.O_ACCMODE != os.O_WRONLY:  # written only: a log, not an input
            out[target] = None
    return list(out)


# the system's own files (shared libraries, locale and time zone data, configuration): any process maps or opens some
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr/bin", "/usr/sbin", "/usr/lib",
                "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib", "/usr/share", "/etc", "/nix/store")


def _system_dirs() -> tuple:
    """_SYSTEM_DIRS, each ending with a separator, but those that hold the project (the current directory)."""
    cwd = os.getcwd() + os.sep
    out = set()
    for d in _SYSTEM_DIRS:
        for p in (d, os.path.realpath(d)):
            if not cwd.startswith(p + os.sep):
                out.add(p + os.sep)
    return tuple(sorted(out))


def _metadata(path: str) -> bool:
    """A file of an installed distribution's metadata (entry points a framework looks up), wherever it lies."""
    return any(part.endswith((".dist-info", ".egg-info")) for part in path.split(os.sep)[:-1])


def _installation_dirs() -> tuple:
    """Where the Python installation, its packages and the harness live, and the pseudo-filesystems: no file
    there is a user's (each ends with a separator)."""
    import site
    import sysconfig
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        dirs.update(site.getsitepackages() + [site.getusersitepackages()])
    except Exception:  # an old virtualenv's site module
        pass
    for entry in sys.path:
        parts = entry.split(os.sep)
        for i, part in enumerate(parts):
            if part in ("site-packages", "dist-packages"):
                dirs.add(os.sep.join(parts[:i + 1]))
    cwd = os.getcwd()
    for d in list(dirs):
        if not d or os.path.abspath(d) == os.sep or (cwd + os.sep).startswith(os.path.abspath(d) + os.sep):
            # a prefix holding the project itself (a Python at /, a project under /usr/local): its libraries only
            dirs.discard(d)
            dirs.update(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the harness package
    out = {"/proc/", "/sys/", "/dev/"}
    for d in dirs:
        if d and os.path.abspath(d) != os.sep:
            out.update(p.rstrip(os.sep) + os.sep for p in (os.path.abspath(d), os.path.realpath(d)))
    return tuple(sorted(out))
