"""What the judge asks of the layer side, one module per area: each declares the methods a framework implements
(``layerside/<framework>/<area>.py``, the same file names in every framework folder) and the typed replies that
cross the process boundary. Imports nothing but the standard library and ``wire``: both sides import it.

Areas: core (build, call, state), autodiff, compile, export, precision, batching, construction, layout (and
aliasing), shapes (abstract shapes, a symbolic batch axis)."""
from __future__ import annotations


class NotApplicable(Exception):
    """The one way to say "this check does not apply here, because REASON", end to end: adapters (the framework
    lacks the mechanism), checks (this layer has no such thing) and the contract's keys (``checks.applicable``)
    all raise or return it; the executor's wire carries it as its one ``not_applicable`` field; the runner
    records it as outcome ``skipped`` with ``not_applicable`` true and ``message`` the reason; every view shows
    that record as n/a with the message. Defined here, where both sides import it without importing a framework
    or each other (``record`` re-exports it).

    Not a plain skip (``checks.CheckSkipped``, a record with ``not_applicable`` false): see the comment there."""

    def __init__(self, reason: str, code: str = "", source: str = ""):
        super().__init__(reason)
        self.reason = reason
        # the reason's id in ``check_catalog.NA_REASONS`` (the closed list each check declares); ``source`` only for
        # an n/a made of others (``check_catalog.na_of``): the judge reads who it rests on from the catalogue
        # (``check_catalog.na_source``), never from the executor's word
        self.code = code
        self.source = source


from .core import CoreProtocol  # noqa: E402  (the areas import NotApplicable from here)
from .autodiff import AutodiffProtocol  # noqa: E402
from .compile import CompileProtocol  # noqa: E402
from .export import ExportProtocol  # noqa: E402
from .precision import PrecisionProtocol  # noqa: E402
from .batching import BatchingProtocol  # noqa: E402
from .construction import ConstructionProtocol  # noqa: E402
from .layout import LayoutProtocol  # noqa: E402
from .shapes import ShapesProtocol  # noqa: E402

# area name -> its protocol: a framework folder has one ``<area>.py`` per entry
AREAS = {"core": CoreProtocol, "autodiff": AutodiffProtocol, "compile": CompileProtocol, "export": ExportProtocol,
         "precision": PrecisionProtocol, "batching": BatchingProtocol, "construction": ConstructionProtocol,
         "layout": LayoutProtocol, "shapes": ShapesProtocol}
PROTOCOLS = tuple(AREAS.values())


class Adapter(*PROTOCOLS):
    """Every area at once: what a framework's adapter class (``layerside/<framework>/__init__.py``) is."""


def methods() -> list[str]:
    """Every public method of every protocol: what an executor's hello says its adapter implements."""
    return sorted(m for p in PROTOCOLS for m, v in vars(p).items() if callable(v) and not m.startswith("_"))
