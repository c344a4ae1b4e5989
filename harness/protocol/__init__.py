"""What the judge asks of the layer side, one module per area: each declares the methods a framework implements
(``layerside/<framework>/<area>.py``, the same file names in every framework folder) and the typed replies that
cross the process boundary. Imports nothing but the standard library and ``wire``: both sides import it.

Areas: core (build, call, state), autodiff, compile, export, precision, batching, construction, layout (and
aliasing), shapes (abstract shapes, a symbolic batch axis)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import wire
from .not_applicable import NotApplicable  # noqa: F401  (the one n/a exception, in a leaf module the areas import: re-exported)


@wire.reply("protocol.NotApplicablePart")
@dataclass(frozen=True)
class NotApplicablePart:
    """A part of a reply that does not apply here (one way of several, one policy, one gradient), with why: the
    value a reply holds where the rest of the reply goes on (``NotApplicable`` ends the whole call). Its text is
    "n/a: REASON", as every view shows an n/a."""
    reason: str     # why, in words
    code: str = ""  # the reason's id in ``check_catalog.NA_REASONS``, where one is given

    def __str__(self) -> str:
        return f"n/a: {self.reason}"


from .core import CoreProtocol  # noqa: E402  (the areas import NotApplicable and NotApplicablePart from here)
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


def _replies() -> dict[str, tuple[type, bool]]:
    """method -> (its reply type, whether it returns a sequence of them), from the protocols' return annotations
    ("CompileStats", "list[ConstructionPart]"): each method's reply is declared once, on the method."""
    types = {cls.__name__: cls for cls in wire.reply_types().values()}
    out = {}
    for protocol in PROTOCOLS:
        for method, fn in vars(protocol).items():
            said = getattr(fn, "__annotations__", {}).get("return")
            if not isinstance(said, str):
                continue
            name = said.removeprefix("list[").removeprefix("tuple[").split(",")[0].rstrip("]").strip()
            if name in types:
                out[method] = (types[name], name != said)
    return out


# method -> (reply type, a sequence of them): what ``typed_reply`` makes of a method's result
REPLIES = _replies()
# a reply dict's older key -> the field it fills (the ways of ``abstract_outputs`` said n/a as "na")
_KEYS = {"na": "not_applicable"}


def typed_reply(method: str, value):
    """``value``, what the adapter's ``method`` returned, as the reply type its protocol declares: a plain dict (or
    a list of them) becomes the type, strictly (an unknown key, or a missing field without a default, raises
    TypeError naming the method and the key); a value that is the type already passes, as does the result of a
    method without a declared reply type."""
    if method not in REPLIES:
        return value
    kind, many = REPLIES[method]
    if many:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{method} returned a {type(value).__name__}, not a list of {kind.__name__}")
        return [_typed(method, kind, v) for v in value]
    return _typed(method, kind, value)


def _typed(method: str, kind: type, value):
    if isinstance(value, kind):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"{method} returned a {type(value).__name__}, not a {kind.__name__}")
    fields = {f.name: f for f in dataclasses.fields(kind)}
    given = {_KEYS.get(k, k): v for k, v in value.items()}
    for key in given:
        if key not in fields:
            raise TypeError(f"{method} returned a {kind.__name__} with the unknown key {key!r}")
    for name, f in fields.items():
        if name not in given and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"{method} returned a {kind.__name__} without the key {name!r}")
    return kind(**{k: _field(fields[k], v) for k, v in given.items()})


def _field(f, value):
    """A dict's value as the field's declared type has it: a reason in words as a NotApplicablePart, a list as a
    tuple."""
    said = str(f.type)
    if isinstance(value, str) and "NotApplicablePart" in said:
        return NotApplicablePart(value)
    if isinstance(value, list) and said.startswith("tuple"):
        return tuple(value)
    return value
