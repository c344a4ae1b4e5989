"""Broken torch layers under torch.compile, each caught by the ``compiled`` check."""
import torch

from tests.mutants.catalogue import Mutant

# a gradient-scale schedule kept in a module global: the forward advances it, the backward reads it
_SCHEDULE = {"step": 0, "scale": 1.0}


class _RoundScheduled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w):
        return torch.round(w)

    @staticmethod
    def backward(ctx, g):
        # a Python global read at trace time: Dynamo guards on its value, so every new value recompiles
        return g * _SCHEDULE["scale"]


def round_ste_annealed(w):
    """Straight-through round with an annealed gradient scale kept in a Python global: each call
    advances the step, the backward reads the scale. The compiled graph captured the value it saw
    at trace time; Dynamo guards on it, so the layer is recompiled on every call."""
    _SCHEDULE["step"] += 1
    _SCHEDULE["scale"] = 1.0 / (1.0 + 0.01 * _SCHEDULE["step"])
    return _RoundScheduled.apply(w)


M = "tests.mutants.torch_compiled"
MUTANTS = [
    Mutant("torch", "round_ste", f"{M}:round_ste_annealed", "compiled",
           "recompiled on a second call with identical inputs", also=('gradients',)),
]
