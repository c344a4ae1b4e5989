"""Broken torch layers under torch.compile, each caught by the ``compiled`` check."""
import torch

from layer_conformance.reference_impls.torch.round_ste import RoundSTE as _RoundSTE
from tests.mutants.catalogue import Mutant

# a gradient-scale schedule kept in a module global: the forward advances it, the backward reads it
_SCHEDULE = {"step": 0, "scale": 1.0}


class _RoundScheduled(_RoundSTE):
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


def round_ste_eager_only(w):
    """The custom Function in eager mode and a plain-op fallback under torch.compile (the pattern of layers
    whose eager path is a kernel the compiler cannot trace), where the fallback forgets the straight-through
    rule: compiled, the gradient is round's, zero everywhere."""
    if torch.compiler.is_compiling():
        return torch.round(w)
    return _RoundSTE.apply(w)


M = "tests.mutants.torch_compiled"
MUTANTS = [
    Mutant("torch", "round_ste", f"{M}:round_ste_annealed", "compiled",
           "recompiled on a second call with identical inputs", also=('gradients',),
           blocked=('layout',)),
    Mutant("torch", "round_ste", f"{M}:round_ste_eager_only", "compiled", "the custom backward is not used"),
]

