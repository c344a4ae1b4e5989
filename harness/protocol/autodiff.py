"""The framework's autodiff: reverse mode, forward mode, second order, and the evidence of a custom rule.

The layer side implements this protocol per framework in ``layerside/<framework>/autodiff.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations


class AutodiffProtocol:
    # -- gradients -------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent):
        """Gradient of sum(fn(*inputs) * cotangent).

        ``fn`` is the layer (or function) to call; ``layer`` holds the state whose gradients
        are wanted (None for a function). Returns (output, input_grads, state_grads) where
        input_grads[i] is the gradient for inputs[i] (None when the framework produced none)
        and state_grads maps every trainable *and* non-trainable name to a gradient or None.
        """
        raise NotImplementedError

    def jvp(self, fn, layer, inputs: list, tangents: list):
        """Forward mode: (output, tangent of the output) for ``fn(*inputs)`` pushed along
        ``tangents`` (one per input, None for an input held constant; state held constant).
        Both native. Frameworks without forward-mode autodiff mark such contracts not applicable."""
        raise NotImplementedError

    def custom_rule_recorded(self, fn, inputs: list, wrt: list[int]) -> bool | None:
        """Whether calling ``fn`` on ``inputs`` (differentiated at ``wrt``) records a custom backward rule that
        differentiation would run (torch.autograd.Function through apply, jax.custom_vjp...): the evidence that
        tells a rule that never ran from one that returned zeros. None where this framework cannot tell."""
        return None

    def hvp(self, fn, layer, inputs: list, wrt: list[int], cotangent, directions: list):
        """Second order: the gradient w.r.t. inputs[j] (j in ``wrt``) of
        sum_i <d/d inputs[i] sum(fn(*inputs) * cotangent), directions[i]> over i in ``wrt``,
        taken by differentiating the framework's own first-order gradient (so through a custom
        backward rule). ``directions`` has one array per input (None outside ``wrt``); state is
        held constant. Returns one gradient per input: None outside ``wrt``, or where the
        framework produced none."""
        raise NotImplementedError
