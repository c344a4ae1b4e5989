"""What the sandbox tests share (tests/hostile/test_sandbox.py, test_sandbox_tight.py): whether this machine has a
sandbox, and the hostile layer they run."""
import pytest

from layer_conformance.boundary import sandbox as sandboxing

PROBLEM = sandboxing.namespaces_problem()
HAVE = "namespaces+cgroup" if not PROBLEM and sandboxing.cgroup_root() else "namespaces" if not PROBLEM else None
needs_sandbox = pytest.mark.skipif(HAVE is None, reason=f"no sandbox here ({PROBLEM})")

LAYER = """\
import ctypes, os, signal, sys, time
import torch
from torch import nn

def _name(comm):
    ctypes.CDLL(None).prctl(15, comm.encode(), 0, 0, 0)   # PR_SET_NAME: the test finds the process by it

class Layer(nn.Module):
    done = False

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        if not Layer.done:
            Layer.done = True
            self.attack()
        Xf = X.float()
        return (self.gain.float() * Xf * Xf.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()).to(X.dtype)

    def attack(self):
        pass
"""
