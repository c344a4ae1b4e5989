"""The framework's autodiff: reverse mode, forward mode, second order, and the evidence of a custom rule.

The layer side implements this protocol per framework in ``layerside/<framework>/autodiff.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import wire


class AutodiffProtocol:
    # -- gradients -------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent) -> Gradients:
        """Gradient of sum(fn(*inputs) * cotangent).

        ``fn`` is the layer (or function) to call; ``layer`` holds the state whose gradients
        are wanted (None for a function). Returns a ``Gradients``: the output, ``inputs[i]`` the
        gradient for inputs[i] (None when the framework produced none), and ``state`` mapping every
        trainable *and* non-trainable name to a gradient or None.
        """
        raise NotImplementedError

    def jvp(self, fn, layer, inputs: list, tangents: list) -> Tangents:
        """Forward mode: a ``Tangents`` (the output, its tangent) for ``fn(*inputs)`` pushed along
        ``tangents`` (one per input, None for an input held constant; state held constant).
        Both native. Frameworks without forward-mode autodiff mark such contracts not applicable."""
        raise NotImplementedError

    def custom_rule_recorded(self, fn, inputs: list, wrt: list[int]) -> bool | None:
        """Whether calling ``fn`` on ``inputs`` (differentiated at ``wrt``) records a custom backward rule that
        differentiation would run (torch.autograd.Function through apply, jax.custom_vjp...): the evidence that
        tells a rule that never ran from one that returned zeros. None where this framework cannot tell."""
        return None

    def hvp(self, fn, layer, inputs: list, wrt: list[int], cotangent, directions: list) -> SecondOrder:
        """Second order: the gradient w.r.t. inputs[j] (j in ``wrt``) of
        sum_i <d/d inputs[i] sum(fn(*inputs) * cotangent), directions[i]> over i in ``wrt``,
        taken by differentiating the framework's own first-order gradient (so through a custom
        backward rule). ``directions`` has one array per input (None outside ``wrt``); state is
        held constant. Returns a ``SecondOrder``, one gradient per input: None outside ``wrt``, or
        where the framework produced none."""
        raise NotImplementedError


@wire.reply("autodiff.Gradients")
@dataclass(frozen=True)
class Gradients:
    """``vjp`` (and ``compiled_vjp``, ``eager_vjp``, ``layout_vjp``): the output and its gradients, native."""
    output: Any
    inputs: tuple    # one per input: its gradient, or None outside ``wrt`` or where the framework produced none
    state: dict      # every trainable and non-trainable name -> its gradient, or None


@wire.reply("autodiff.Tangents")
@dataclass(frozen=True)
class Tangents:
    """``jvp``: the output and its tangent, native."""
    output: Any
    tangent: Any


@wire.reply("autodiff.SecondOrder")
@dataclass(frozen=True)
class SecondOrder:
    """``hvp``: one second-order gradient per input, native; None outside ``wrt`` or where none came."""
    inputs: tuple
