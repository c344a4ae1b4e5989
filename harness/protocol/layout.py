"""Memory layout and aliasing (the ``layout`` and ``aliasing`` checks).

The layer side implements this protocol per framework in ``layerside/<framework>/layout.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import wire
from .autodiff import Gradients
from .not_applicable import NotApplicable


class LayoutProtocol:
    # -- memory layout and aliasing (the ``layout`` and ``aliasing`` checks) -------------------
    def layouts(self, inputs: list) -> list[str]:
        """The memory layouts ``layout_vjp`` can give these inputs besides "contiguous" (torch: "transposed",
        "strided", "channels_last" for 4-D inputs). ``NotApplicable`` where the framework's arrays have none."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def layout_vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent, layout: str) -> Gradients:
        """``vjp`` with every input and the output's gradient laid out in memory as ``layout`` says (same values,
        other strides). Returns ``Gradients`` as ``vjp``, native."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def aliased_vjp(self, fn, inputs: list, i: int, j: int, cotangent,
                    compiled: str | None = None) -> AliasedGradient:
        """For a function: the gradient of sum(fn(*inputs) * cotangent) w.r.t. one tensor passed as both input
        ``i`` and input ``j`` (``inputs[j]`` is left out; the same native object goes in at both places),
        eagerly, or under ``compiled`` (one of ``compilers()``). Returns an ``AliasedGradient``, native."""
        def twice(*xs):
            xs = list(xs)
            xs.insert(j, xs[i])
            return fn(*xs)
        rest = [a for k, a in enumerate(inputs) if k != j]
        wrt = [i if i < j else i - 1]
        if compiled is None:
            got = self.vjp(twice, None, rest, wrt, cotangent)
        else:
            got = self.compiled_vjp(self.compile(twice, None, compiled), None, rest, wrt, cotangent)
        return AliasedGradient(output=got.output, gradient=got.inputs[wrt[0]])

    def input_changes(self, fn, layer, inputs: list, wrt: list[int], cotangent) -> InputChanges:
        """Whether calling ``fn`` (and one backward pass for the inputs in ``wrt``) changes its inputs in place:
        an ``InputChanges``. The inputs are fresh native arrays
        (not leaves of the graph, so that an in-place write is allowed where the framework allows it).
        ``NotApplicable`` where the framework's arrays cannot change."""
        raise NotImplementedError


@wire.reply("layout.AliasedGradient")
@dataclass(frozen=True)
class AliasedGradient:
    """``aliased_vjp``: the output, and the one gradient of the tensor passed at two places, native."""
    output: Any
    gradient: Any


@wire.reply("layout.InputChanges")
@dataclass(frozen=True)
class InputChanges:
    """``input_changes``: which inputs a call and its backward pass changed in place, and what they gave."""
    forward: tuple[int, ...]             # indices of the inputs the call changed
    backward: tuple[int, ...]            # indices of those the backward pass changed (and the call did not)
    versions: tuple[int, ...] | None     # indices whose version counter moved; None where the framework keeps none
    output: Any                          # the call's output, native
    input_grads: tuple                   # one gradient per input, native; None outside ``wrt`` or where none came
    state_grads: dict                    # state name -> its gradient, native, or None
    ops: dict = field(default_factory=dict)  # input index -> the in-place operations seen writing into it, in words
