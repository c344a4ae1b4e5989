"""What /proc says of a process, for the judge's side of the boundary: its state, a field of its stat line, and
the host pid of an executor that names itself by its pid in its own namespace."""
from __future__ import annotations

import contextlib
import os
import time


def process_state(pid: int) -> str | None:
    """The state letter of a process in /proc (R, S, D, Z, T stopped by a signal, t stopped by a tracer), or
    None where there is no such process."""
    return stat_field(pid, 0)


def stat_field(pid: int, index: int) -> str | None:
    """Field ``index`` of /proc/PID/stat after the command's name (0: the state, 19: the start time), or None where
    there is no such process: the one reader of that file."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[index]
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
