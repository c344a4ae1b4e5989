"""How the judge starts an executor's process and watches it from outside: the command and the import path it
starts with, the directories it reads (kept visible in its sandbox), its memory, and where it was when it hung
(from the stacks it dumps)."""
from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import sysconfig
from pathlib import Path

from .. import import_paths

_FRAME = re.compile(r'^\s*File "(.+)", line (\d+) in (.+)$')
_HARNESS = str(Path(__file__).resolve().parents[1])
_SERVER = str(Path(_HARNESS) / "layerside" / "server.py")  # a path only: the judge never imports it
_STDLIB = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}


def innermost_place(dump: str) -> str:
    """From a faulthandler dump (every thread, innermost frame first): the innermost frame outside the harness
    and the standard library, of the thread that is answering a request (the one with the server's frames)."""
    threads, frames = [], []
    for line in dump.splitlines():
        m = _FRAME.match(line)
        if m:
            frames.append(m.groups())
        elif frames:
            threads.append(frames)
            frames = []
    if frames:
        threads.append(frames)
    serving = [t for t in threads if any(f == _SERVER for f, _, _ in t)]
    for file, line, function in (serving or [[]])[0]:
        if file == _SERVER:
            return ""  # the request's own frames are below: the process was not in a layer's call
        if not file.startswith(_HARNESS) and not any(file.startswith(p) for p in _STDLIB):
            return f"(at {file}:{line} in {function})"
    return ""


def import_path(role: str, user_reference: bool = False) -> list[str]:
    """What an executor of ``role`` puts on its sys.path AFTER its own interpreter's (layerside/server.py): the
    tree under test for the processes that import it (layer, fresh, probe), nothing for the zygotes, the native
    executors and the bundled references (layer_conformance.import_paths). Nothing of the judge's own
    installation: an executor under another Python (--executor-python mxnet=...) imports its own numpy."""
    return import_paths.executor_path(role, user_reference)


def own_paths_first(python: str) -> str:
    """The command that starts ``python`` for an executor: with -P (Python 3.11 and later), so that ``python -c``
    puts no working directory first on its sys.path (layerside/server.py drops it where -P cannot)."""
    import shlex
    program = shlex.split(python)   # (as execnet and the sandbox read it)
    return shlex.join(program + ["-P"]) if program and _has_safe_path(tuple(program)) else python


_SAFE_PATH: dict = {}


def _has_safe_path(program: tuple) -> bool:
    python = program
    if python not in _SAFE_PATH:
        if len(program) == 1 and os.path.realpath(program[0]) == os.path.realpath(sys.executable):
            _SAFE_PATH[python] = sys.version_info >= (3, 11)
        else:
            import subprocess
            try:
                _SAFE_PATH[python] = subprocess.run([*program, "-I", "-P", "-c", ""], capture_output=True,
                                                    timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                _SAFE_PATH[python] = False
    return _SAFE_PATH[python]


def reads() -> list[str]:
    """The directories an executor started now imports from (kept visible in its sandbox)."""
    return import_paths.trusted_tree() + import_paths.code_tree() + sys.path + package_dirs()


def rss_gib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2 ** 20
    except OSError:
        pass
    return 0.0


def package_dirs() -> list[str]:
    """Where this package's own files lie: in an editable install (a checkout under /tmp, say) they are on no
    sys.path entry, and the sandbox keeps visible only the directories an executor is said to read."""
    dirs = [str(Path(__file__).resolve().parents[1])]
    for name in ("layer_conformance.reference_impls", "layer_conformance.specs"):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            dirs += list(spec.submodule_search_locations or []) if spec else []
    return dirs
