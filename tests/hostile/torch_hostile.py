"""Hostile PyTorch layers for the rmsnorm contract: each misbehaves in one way the harness must survive."""
import os

import torch
from torch import nn


class _Base(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def correct(self, X):
        return self.gain * X * X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()


class Raises(_Base):
    def forward(self, X):
        raise ValueError("boom from the user's forward")


class ReturnsNaN(_Base):
    def forward(self, X):
        Y = self.correct(X).clone()
        Y[0, :3] = float("nan")
        Y[1, 0] = float("inf")
        return Y


class WrongShape(_Base):
    def forward(self, X):
        return self.correct(X)[..., :-1]


class WrongDtype(_Base):
    def forward(self, X):
        return self.correct(X).double()


class ReturnsObject(_Base):
    def forward(self, X):
        return {"output": self.correct(X)}


class Hangs(_Base):
    def forward(self, X):
        while True:
            pass


class Aborts(_Base):
    def forward(self, X):
        os.abort()


class MutatesGlobals(_Base):
    """Sets float64 as the default dtype, reseeds the RNG and changes the thread count, then behaves."""
    def forward(self, X):
        torch.set_default_dtype(torch.float64)
        torch.manual_seed(1234)
        torch.set_num_threads(1)
        return self.correct(X)


class ExhaustsMemory(_Base):
    """Allocates far more than any limit allows (64 GiB)."""
    def forward(self, X):
        hog = torch.ones(16 * 2 ** 30)
        return self.correct(X) + hog[:1]


class Deadlocks(_Base):
    """Waits for a lock it already holds."""
    def forward(self, X):
        import threading
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()


class HangsInNativeCode(_Base):
    """Hangs the way native code does: with the timer's signal blocked, as a C library stuck in a
    wait with signals masked would, so no Python signal handler ever runs."""
    def forward(self, X):
        import signal
        import time
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)


# --- attacks on the judge: none of them may change a verdict, end the run green or lose a result ---

class OffByTwo(_Base):
    """Wrong (2x) and nothing else: what the attackers below try to get passed."""
    def forward(self, X):
        return 2 * self.correct(X)


class RaisesCheckSkipped(_Base):
    """Raises the harness's own skip exception to turn every check into a skip."""
    def forward(self, X):
        from layer_conformance.checks import CheckSkipped
        raise CheckSkipped("not applicable, honestly")


class RaisesUnsupported(_Base):
    """Raises the harness's one n/a exception (what an adapter raises) from the layer's code."""
    def forward(self, X):
        from layer_conformance.record import NotApplicable
        raise NotApplicable("this framework cannot do that")


class CallsPytestSkip(_Base):
    def forward(self, X):
        import pytest
        pytest.skip("nothing to see here")


class ExitsZero(_Base):
    """Ends its process with status 0 in the middle of a check."""
    def forward(self, X):
        os._exit(0)


class SysExitZero(_Base):
    def forward(self, X):
        raise SystemExit(0)


class SwallowsEverything(_Base):
    """Disarms the interval timer, ignores SIGALRM/SIGTERM/SIGINT and swallows BaseException while it loops."""
    def forward(self, X):
        import signal
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
                while True:
                    pass
            except BaseException:
                continue


class CancelsWatchdogs(_Base):
    """Cancels every timer thread in its process, then hangs with signals masked."""
    def forward(self, X):
        import signal
        import threading
        import time
        for t in threading.enumerate():
            if isinstance(t, threading.Timer):
                t.cancel()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
        time.sleep(3600)


class LeavesThread(_Base):
    """Starts a non-daemon thread that never ends, and computes correctly."""
    def forward(self, X):
        import threading
        import time
        threading.Thread(target=lambda: time.sleep(10 ** 6), name="left-behind", daemon=False).start()
        return self.correct(X)


class LiftsMemoryCap(_Base):
    """Raises its own memory limit, then allocates without bound (touching every page)."""
    def forward(self, X):
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        hog = []
        while True:
            hog.append(torch.ones(2 ** 28))  # 1 GiB each


class Forks(_Base):
    """Forks in forward; both processes carry on and compute correctly."""
    def forward(self, X):
        os.fork()
        return self.correct(X)


class RaisesThroughTheAdapter(_Base):
    """Calls the adapter interface's own placeholder so that "not implemented" is raised from layer_conformance code."""
    def forward(self, X):
        from layer_conformance.protocol import Adapter
        Adapter.jvp(None, None, None, [X], [None])


class HangsWhenPickled(_Base):
    """Correct, but hangs while torch.save pickles it (the export check saves the whole module)."""
    def forward(self, X):
        return self.correct(X)

    def __reduce_ex__(self, protocol):
        import time
        time.sleep(3600)
        return super().__reduce_ex__(protocol)


class HidesWhereItHangs(_Base):
    """Hangs with every signal that can be ignored ignored, process-wide: no stack dump, so a timeout can
    name no place. (Blocking signals in its own thread is not enough: another thread takes them.)"""
    def forward(self, X):
        import signal
        import time
        for sig in set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP}:
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError, RuntimeError):
                pass
        time.sleep(3600)

