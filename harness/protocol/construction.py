"""The ways real code builds a layer (the ``construction`` check).

The layer side implements this protocol per framework in ``layerside/<framework>/construction.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass

from .. import wire
from .not_applicable import NotApplicablePart
from .not_applicable import NotApplicable


class ConstructionProtocol:
    # -- construction: the ways real code builds a layer (the ``construction`` check) ---------------------------
    def construction_run(self, impl, constructor: dict, inputs: list, expected: dict,
                         other: list | None = None) -> list[ConstructionPart]:
        """``impl`` (a class or factory) constructed from ``constructor`` the ways real code builds a layer in
        this framework (torch: factory keyword arguments, construction on meta then ``to_empty`` and
        ``reset_parameters``; Keras: ``build(input_shape)`` alone, ``compute_output_shape`` unbuilt; NNX:
        ``nnx.eval_shape`` and a repeated seed; Gluon: deferred initialisation), each compared with a plain
        build's state (``inputs``: the first case's, for a call where one is needed). ``expected``: {"trainable":
        the contract's count of trainable slots, "non_trainable": of the others, "reset_parameters": "optional"
        or "required"}. ``other``: another case's inputs (other shapes; None where every case has the first's),
        for a way whose first call infers the state's shapes (Gluon's deferred initialisation), which must infer
        the plain build's from it. Returns one ``ConstructionPart`` per way. Raises NotApplicable where no way
        applies to the layer."""
        raise NotImplementedError


@wire.reply("construction.ConstructionPart")
@dataclass(frozen=True)
class ConstructionPart:
    """``construction_run``: one way of building the layer, and what it built otherwise than a plain build."""
    part: str                                  # the way, in words
    problems: tuple[str, ...] = ()             # what differs, naming the slots; empty where the way agrees
    hint: str | None = None                    # a hint id of ``checks/mistakes.py`` for the problems, or None
    not_applicable: NotApplicablePart | None = None  # why this way cannot run here (then no problems)
