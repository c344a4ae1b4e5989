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
