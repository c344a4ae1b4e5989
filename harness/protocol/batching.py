"""The framework's vectorising transform (the ``batching`` check).

The layer side implements this protocol per framework in ``layerside/<framework>/batching.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass

from .. import wire
from .not_applicable import NotApplicablePart
from .not_applicable import NotApplicable


class BatchingProtocol:
    # -- the vectorising transform (the ``batching`` check) ---------------------------------
    def vmap_call(self, fn, layer, inputs: list, in_axes: list, axis: int, required: bool = False):
        """``fn`` (the layer in evaluation mode, or the function) under the framework's vectorising transform
        (``jax.vmap``/``nnx.vmap``, ``torch.func.vmap`` over ``functional_call``, ``tf.vectorized_map``),
        mapped over ``in_axes`` (one per input: its batch axis, or None for an input every example shares),
        the output's batch axis at ``axis``. Native. Raise ``NotApplicable`` where the framework has no such
        transform, or (unless ``required``) where it cannot hold the layer's custom rule, saying why."""
        raise NotImplementedError

    def vmap_vjp(self, fn, inputs: list, in_axes: list, axis: int, wrt: list[int], cotangent,
                 required: bool = False) -> VmapGrads:
        """For a function: the gradient of the vectorised function and the vectorised gradient, a ``VmapGrads``.
        ``NotApplicable`` as ``vmap_call``."""
        raise NotImplementedError


@wire.reply("batching.VmapGrads")
@dataclass(frozen=True)
class VmapGrads:
    """``vmap_vjp``: a function's gradients taken both ways round the vectorising transform, each one gradient per
    input (native; None outside ``wrt``), or n/a where the framework cannot take it that way."""
    grad_of_vmap: tuple | NotApplicablePart  # the gradient of sum(vmap(fn)(*inputs) * cotangent)
    vmap_of_grad: tuple | NotApplicablePart  # each example's gradient of sum(fn(*example) * its cotangent), vectorised
