"""What the judge asks of the layer side, one module per area: each declares the methods a framework implements
(``layerside/<framework>/<area>.py``, the same file names in every framework folder) and the typed replies that
cross the process boundary. Imports nothing but the standard library and ``wire``: both sides import it.

Areas: core (build, call, state), autodiff, compile, export, precision, batching, construction, layout (and
aliasing), shapes (abstract shapes, a symbolic batch axis)."""
from __future__ import annotations

import dataclasses
import inspect
import re

from .. import wire
from .not_applicable import NotApplicable, NotApplicablePart  # noqa: F401  (in a leaf module the areas import: re-exported)


from .core import CoreProtocol  # noqa: E402
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


# method -> (reply type, a sequence of them): what ``typed_reply`` holds a method's result to
REPLIES = _replies()


def typed_reply(method: str, value):
    """``value``, what the adapter's ``method`` returned, checked against the reply type its protocol declares: the
    type itself (or, where the method returns a sequence of them, a list or tuple of it, given back as a list)
    passes as it is; anything else (a plain dict, a list of dicts) raises TypeError naming the method, so that a
    layer-side adapter that returns an untyped structure is caught where it answers. The result of a method without
    a declared reply type passes untouched."""
    if method not in REPLIES:
        return value
    kind, many = REPLIES[method]
    if not many:
        if not isinstance(value, kind):
            raise TypeError(f"{method} returned a {type(value).__name__}, not a {kind.__name__}")
        return value
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{method} returned a {type(value).__name__}, not a list of {kind.__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, kind):
            raise TypeError(f"{method} returned a list whose item {i} is a {type(item).__name__}, not a "
                            f"{kind.__name__}")
    return list(value)


# -- requests: one frozen dataclass per method, its fields the method's parameters ----------------------------------

def _request_type(method: str) -> type:
    """``method``'s request type, made from its signature on the protocol: the parameters after self, in order,
    with their defaults; registered on the wire as ``request.<method>``."""
    fields = []
    for p in list(inspect.signature(getattr(Adapter, method)).parameters.values())[1:]:
        if p.kind is not p.POSITIONAL_OR_KEYWORD:  # a request is its named fields: *args, **kwargs have no name
            raise TypeError(f"protocol method {method}: parameter {p.name} is {p.kind.description}; a protocol "
                            f"method takes named parameters only")
        kind = p.annotation if p.annotation is not p.empty else "typing.Any"
        fields.append((p.name, kind) if p.default is p.empty else (p.name, kind, dataclasses.field(default=p.default)))
    cls = dataclasses.make_dataclass(f"{method}_request", fields, frozen=True)
    cls.__module__, cls.__qualname__ = __name__, f"request.{method}"
    return wire.request(f"request.{method}")(cls)


# method -> its request type, and back: made once, at import
REQUESTS = {m: _request_type(m) for m in methods()}
_METHODS = {cls: m for m, cls in REQUESTS.items()}
_INIT = re.compile(r"^\S*__init__\(\) ")


def request(method: str, *args, **kwargs):
    """The judge's call ``method(*args, **kwargs)`` as its request type. A method no protocol declares raises
    AttributeError; a call that does not fit the method's signature raises TypeError naming the method and the
    parameter (``vjp() missing 1 required positional argument: 'cotangent'``), before anything is sent."""
    cls = REQUESTS.get(method)
    if cls is None:
        raise AttributeError(f"no protocol declares a method {method!r}")
    try:
        return cls(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{method}() {_INIT.sub('', str(exc))}") from None


def method_of(req) -> str:
    """The protocol method a request (decoded by ``wire``) asks for; WireError for anything else."""
    method = _METHODS.get(type(req))
    if method is None:
        raise wire.WireError(f"a call arrived as a {type(req).__name__}, not as a protocol method's request")
    return method


def answer(adapter, req):
    """What ``adapter`` answers to the request ``req``: its method called with the request's fields by keyword,
    the reply held to the method's declared type (``typed_reply``)."""
    method = method_of(req)
    fields = {f.name: getattr(req, f.name) for f in dataclasses.fields(req)}
    return typed_reply(method, getattr(adapter, method)(**fields))
