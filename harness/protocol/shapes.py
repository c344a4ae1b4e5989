"""Shapes without data and a symbolic batch axis (the ``abstract`` check).

The layer side implements this protocol per framework in ``layerside/<framework>/shapes.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from . import NotApplicable


class ShapesProtocol:
    # -- shapes without data (the ``abstract`` check) ---------------------------------------
    def abstract_outputs(self, fn, layer, inputs: list) -> list[dict]:
        """The output's shape and dtype computed without data, in evaluation mode, once per way the framework
        has: [{"way": words, "shape": [int], "dtype": name as ``dtype_name``}, or with "error": what it raised
        (the layer's failure), or with "na": why this way cannot run here]."""
        raise NotImplementedError

    def symbolic_batch(self, fn, layer, batches: list, batched: list, axis: int) -> dict:
        """One program with the batch axis ``axis`` of the ``batched`` inputs symbolic (traced or exported once,
        from ``batches[0]``), run on each input list of ``batches``: {"way": words, "outputs": [numpy]}. Raise
        ``NotApplicable`` where the framework cannot hold the layer that way (saying why)."""
        raise NotImplementedError
