"""Shapes without data and a symbolic batch axis (the ``abstract`` check).

The layer side implements this protocol per framework in ``layerside/<framework>/shapes.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass

from .. import wire
from .not_applicable import NotApplicablePart
from .not_applicable import NotApplicable


class ShapesProtocol:
    # -- shapes without data (the ``abstract`` check) ---------------------------------------
    def abstract_outputs(self, fn, layer, inputs: list) -> list[AbstractWay]:
        """The output's shape and dtype computed without data, in evaluation mode, once per way the framework
        has: one ``AbstractWay`` each."""
        raise NotImplementedError

    def symbolic_batch(self, fn, layer, batches: list, batched: list, axis: int) -> SymbolicBatch:
        """One program with the batch axis ``axis`` of the ``batched`` inputs symbolic (traced or exported once,
        from ``batches[0]``), run on each input list of ``batches``: a ``SymbolicBatch``. Raise
        ``NotApplicable`` where the framework cannot hold the layer that way (saying why)."""
        raise NotImplementedError


@wire.reply("shapes.AbstractWay")
@dataclass(frozen=True)
class AbstractWay:
    """``abstract_outputs``: the output's shape and dtype by one way without data; or what that way raised (the
    layer's failure), or why it cannot run here."""
    way: str                                 # the way, in words
    shape: tuple[int, ...] | None = None     # the output's shape, where the way gave one
    dtype: str | None = None                 # its dtype as ``dtype_name`` says it; None where the way gives none
    error: str | None = None                 # what the way raised or gave instead of a shape
    not_applicable: NotApplicablePart | None = None  # why this way cannot run here


@wire.reply("shapes.SymbolicBatch")
@dataclass(frozen=True)
class SymbolicBatch:
    """``symbolic_batch``: one program with a symbolic batch axis, run at each batch."""
    way: str        # the program, in words
    outputs: tuple  # its output on each input list, numpy
