"""Memory layout and aliasing (the ``layout`` and ``aliasing`` checks).

The layer side implements this protocol per framework in ``layerside/<framework>/layout.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from . import NotApplicable


class LayoutProtocol:
    # -- memory layout and aliasing (the ``layout`` and ``aliasing`` checks) -------------------
    def layouts(self, inputs: list) -> list[str]:
        """The memory layouts ``layout_vjp`` can give these inputs besides "contiguous" (torch: "transposed",
        "strided", "channels_last" for 4-D inputs). ``NotApplicable`` where the framework's arrays have none."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def layout_vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent, layout: str):
        """``vjp`` with every input and the output's gradient laid out in memory as ``layout`` says (same values,
        other strides). Returns (output, input_grads, state_grads) as ``vjp``, native."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def aliased_vjp(self, fn, inputs: list, i: int, j: int, cotangent, compiled: str | None = None):
        """For a function: the gradient of sum(fn(*inputs) * cotangent) w.r.t. one tensor passed as both input
        ``i`` and input ``j`` (``inputs[j]`` is left out; the same native object goes in at both places),
        eagerly, or under ``compiled`` (one of ``compilers()``). Returns (output, gradient), native."""
        def twice(*xs):
            xs = list(xs)
            xs.insert(j, xs[i])
            return fn(*xs)
        rest = [a for k, a in enumerate(inputs) if k != j]
        wrt = [i if i < j else i - 1]
        if compiled is None:
            out, grads, _ = self.vjp(twice, None, rest, wrt, cotangent)
        else:
            out, grads, _ = self.compiled_vjp(self.compile(twice, None, compiled), None, rest, wrt, cotangent)
        return out, grads[wrt[0]]

    def input_changes(self, fn, layer, inputs: list, wrt: list[int], cotangent) -> dict:
        """Whether calling ``fn`` (and one backward pass for the inputs in ``wrt``) changes its inputs in place:
        {"forward": [indices of inputs changed by the call], "backward": [changed by the backward],
        "versions": [indices whose framework version counter moved] or None where the framework keeps none,
        "output": native, "input_grads": [...], "state_grads": {...}}. The inputs are fresh native arrays
        (not leaves of the graph, so that an in-place write is allowed where the framework allows it).
        ``NotApplicable`` where the framework's arrays cannot change."""
        raise NotImplementedError
