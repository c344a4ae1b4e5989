"""An executor process's stderr, kept out of the terminal: the file the process writes into, bounded on disk,
and the tail a check keeps of it."""
from __future__ import annotations

import contextlib
import os

STDERR_TAIL = 64 << 10   # the last bytes of an executor's stderr a check keeps
STDERR_SPILL = 1 << 20   # bytes its file may hold before the tail is taken in and the file emptied


class StderrTail:
    """An executor process's stderr, which the process points at a file of the judge's as it starts: nothing
    it writes (framework logs, the layer's prints and warnings) reaches the terminal. Bounded on both sides:
    past STDERR_SPILL bytes the disk blocks before the file's last STDERR_TAIL bytes are freed (a hole; where the
    file system has none, the tail is taken into memory and the file emptied: the process appends, so it writes
    on at the new end), and what is read is the last STDERR_TAIL bytes since ``clear``."""

    def __init__(self):
        self.fd: int | None = None
        self.kept = b""
        self._freed = 0  # the file's first bytes, freed on disk (a hole): its size still counts them

    def open(self) -> str:
        """A new file for a new process; the path it opens. What the previous process wrote is kept."""
        import tempfile
        self.close()
        self.fd, path = tempfile.mkstemp(prefix="conformance-stderr-")
        return path

    def clear(self):
        """A check begins: what was written before is not its."""
        self.kept = b""
        self._freed = 0
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)

    def spill(self):
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            size = os.fstat(self.fd).st_size
            if size - self._freed <= STDERR_SPILL:
                return
            # the disk blocks before the tail are freed, the file's size and what follows kept: the process writes
            # on while this runs, and a write at that moment (a layer's last line) is never lost
            if _punch_hole(self.fd, size - STDERR_TAIL):
                self._freed = size - STDERR_TAIL
                return
            # a file system without hole punching: the tail taken in and the file emptied, where what the process
            # writes between these two lines is lost
            self.kept = self._tail()
            os.ftruncate(self.fd, 0)
            self._freed = 0

    def _tail(self) -> bytes:
        data = b""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                size = os.fstat(self.fd).st_size
                data = os.pread(self.fd, STDERR_TAIL, max(0, size - STDERR_TAIL))
        return (self.kept + data)[-STDERR_TAIL:]

    def text(self) -> str:
        return self._tail().decode(errors="replace")

    def close(self):
        """The process is gone: its tail stays readable, its file goes."""
        if self.fd is not None:
            self.kept = self._tail()
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def _punch_hole(fd: int, length: int) -> bool:
    """Free a file's first ``length`` bytes on disk, its size and the bytes after them kept (Linux's
    ``fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)``; the standard library has no call for it). False
    where the platform or file system has none."""
    global _fallocate
    if _fallocate is None:
        try:
            import ctypes
            import ctypes.util
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            _fallocate = libc.fallocate
            _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        except (OSError, AttributeError, TypeError):
            _fallocate = False
    if not _fallocate or length <= 0:
        return False
    return _fallocate(fd, 0x02 | 0x01, 0, length) == 0   # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


_fallocate = None


def stderr_tail(executors) -> str:
    """What the code under test wrote to stderr in a check, in its layer and fresh executors (the native and
    reference executors run none of it): the last STDERR_TAIL bytes of their output, in order."""
    text = "".join(ex.stderr.text() for ex in executors if ex.role in ("layer", "fresh"))
    return text[-STDERR_TAIL:]
