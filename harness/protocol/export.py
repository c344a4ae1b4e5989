"""The framework's own whole-layer formats (the ``export`` check).

The layer side implements this protocol per framework in ``layerside/<framework>/export.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import wire
from .not_applicable import NotApplicable


class ExportProtocol:
    # -- export: the framework's own whole-layer formats (the ``export`` check) -------------------
    def export_formats(self, obj) -> list[str]:
        """The framework's whole-layer save formats that can hold ``obj`` (a built layer, or a function
        contract's callable), in the order the export check runs them. Raises NotApplicable when none can."""
        raise NotImplementedError

    def export_save(self, obj, fmt: str, examples: list, path: str) -> ExportNotes:
        """Save ``obj`` whole in format ``fmt`` into the new directory ``path``, traced on each input list
        of ``examples`` where the format is a traced program. Returns ``ExportNotes``. Raises NotApplicable
        where the format cannot hold ``obj`` (the framework's reason)."""
        raise NotImplementedError

    def export_load(self, fmt: str, path: str, impl_spec: str | None = None, constructor: dict | None = None,
                    examples: list | None = None):
        """What ``export_save`` wrote, loaded the way a deployment loads it, in a process that has not
        built the layer: ``(callable, layer or None)`` for ``call``/``vjp``. ``impl_spec`` (module:attr)
        is imported first where the format refers to the user's Python classes; a format that holds
        weights only loads them into a fresh instance (``constructor`` arguments, built on ``examples[0]``)."""
        raise NotImplementedError


@wire.reply("export.ExportNotes")
@dataclass(frozen=True)
class ExportNotes:
    """``export_save``: what the saved format keeps, and what its loaded form is to be compared with."""
    gradients: str = "kept"             # what the format keeps of the backward: "kept", or why not
    state_gradients: str | None = None  # what it keeps of the state's gradients, where that differs
    runs_as: Any = None                 # a handle to the traced program the format holds, in the original process
    runs_as_what: str | None = None     # that program, in words (what the loaded one must be bit-equal to)
    without_option: str | None = None   # what saving without the format's custom-gradient option does, in words
