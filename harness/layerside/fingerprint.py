"""The executor's own code, fingerprinted before the code under test runs and checked after each request.

What an executor answers is decided by the harness's code in that process: the adapter's methods, the server's
``op_*`` methods and its exception description, ``wire``'s encoding, the ``errors`` helpers, execnet's channel
that carries the answer. A layer runs in the same process and could replace any of them (``Adapter.call``
halving its output, ``wire.encode`` rewriting an array, ``func.__code__ = other.__code__``) and so pass a check it
fails. ``take`` records, before the first request that can run code under test:

* for each function of those modules and of their classes: the function object bound to its name, its
  ``__code__`` (identity, and a digest of ``co_code``, ``co_consts`` and ``co_names``), ``__defaults__``,
  ``__kwdefaults__``, ``__globals__`` and the contents of its closure cells;
* for each such module: every attribute bound to a function, class, module, other callable or immutable
  constant, and the module ``sys.modules`` holds under its name; for each class, its attributes and its MRO;
* the server and adapter instances: their class, and no method shadowed on the instance;
* the built-in functions and types, and the few numpy functions ``wire`` writes and reads arrays with.

``changes`` compares the process with that record and names what differs ("layer_conformance.wire.encode
replaced (by encode at patcher.py:12)"): the bindings after each request, before its answer is encoded
(``seen``, 0.1 ms), and everything, each function's code and defaults and each code object's digest included, at
the end of each check (``ended``, about 1 ms). The judge makes such a check an error
(``boundary.session.Session.end_check``).

This raises the cost of a lie; it cannot rule one out. Code in the same process can patch this module too (or
``Server.op_end_check``, or the answer on its way out); a patch made and undone within one request, by code
that runs after the layer's own in that request, is not seen, nor is a function's ``__code__`` or defaults
swapped and put back between the end of one request and the end of the check. The framework itself (``torch.Tensor.numpy``) and
numpy beyond ``wire``'s few functions are not watched. What stands between a layer and the judge is the process
boundary (the judge compares in its own process, against references computed elsewhere), the sandbox, and the
pull request in which such a patch is visible.
"""
from __future__ import annotations

import builtins
import sys
import types
import zlib
from operator import attrgetter, is_not, itemgetter

# the harness modules whose code decides what an executor answers (with the framework's adapter package, its area
# modules and whatever else of the layer side and the protocol is loaded: ``LOADED``)
MODULES = ("layer_conformance.layerside.server", "layer_conformance.layerside.fingerprint", "layer_conformance.wire",
           "layer_conformance.errors", "layer_conformance.record", "layer_conformance.binding",
           "layer_conformance.layerside", "layer_conformance.layerside.common", "layer_conformance.protocol")
LOADED = ("layer_conformance.layerside.", "layer_conformance.protocol.")
# what wire.py calls into besides its own code: numpy's .npy writer and reader
LIBRARY = ("numpy.lib.format",)
LIBRARY_NAMES = {"numpy": ("save", "load", "asarray", "ndarray", "generic", "object_", "dtype"), "io": ("BytesIO",)}
_CONSTANT = (str, bytes, int, float, complex, bool, tuple, frozenset)
_INTERACTIVE = {"print", "input", "help", "breakpoint", "exit", "quit", "copyright", "credits", "license"}


class Record:
    """The fingerprint of one process: flat lists, so that a check is a few thousand identity tests."""

    def __init__(self):
        self.modules: list = []    # (name, module): what sys.modules holds under the name
        self.bound: list = []      # (label, namespace dict, name, object): the object bound to the name
        self.functions: list = []  # (label, function, code, digest, defaults, kwdefaults items, globals, cells)
        self.mros: list = []       # (label, class, mro)
        self.instances: list = []  # (label, object, class, shadowable names, {name: value bound on the instance})
        self.absent: list = []     # (label, class namespace, name): a name the class inherits, not bound there
        self.seen: list = []       # changes seen between requests since the last ``ended``
        self.fast = None           # the same, as parallel tuples that ``_unchanged`` compares in C loops

    def freeze(self) -> Record:
        spaces: dict = {}
        for _, space, attr, value in self.bound:
            names, values = spaces.setdefault(id(space), (space, [], []))[1:]
            names.append(attr)
            values.append(value)
        functions = tuple(f[1] for f in self.functions)
        self.fast = (tuple(n for n, _ in self.modules), tuple(m for _, m in self.modules),
                     tuple((space, itemgetter(*names), tuple(values), len(names) == 1)
                           for space, names, values in spaces.values()),
                     functions, tuple(f[2] for f in self.functions), tuple(f[4] for f in self.functions),
                     tuple(f[6] for f in self.functions),
                     tuple(f for f in self.functions if f[5] is not None or f[7]),
                     tuple(c for _, c, _ in self.mros), tuple(m for _, _, m in self.mros),
                     tuple((space, tuple(n for _, s, n in self.absent if s is space))
                           for space in {id(s): s for _, s, _ in self.absent}.values()))
        return self


def take(server) -> Record:
    """The fingerprint of this process's harness code, as ``server`` (a ``Server``) and its adapter run it now."""
    rec = Record()
    names = list(MODULES)
    adapter = getattr(server, "adapter", None)
    if adapter is not None:
        names.append(type(adapter).__module__)
    for name in list(sys.modules):
        if name.startswith(LOADED) and name not in names:
            names.append(name)
    for name in names:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name, fromlist=["_"])
            except Exception:
                continue
        rec.modules.append((name, module))
        _module(rec, name, module)
    for name in LIBRARY:
        module = sys.modules.get(name)
        if module is not None:
            rec.modules.append((name, module))
            _module(rec, name, module)
    for name, attrs in LIBRARY_NAMES.items():
        module = sys.modules.get(name)
        if module is not None:
            for attr in attrs:
                if attr in vars(module):
                    rec.bound.append((f"{name}.{attr}", vars(module), attr, vars(module)[attr]))
    for attr, value in vars(builtins).items():
        if not attr.startswith("_") and attr not in _INTERACTIVE and isinstance(value, (types.BuiltinFunctionType, type)):
            rec.bound.append((f"builtins.{attr}", vars(builtins), attr, value))
    channel = getattr(server, "channel", None)
    if channel is not None:  # execnet's gateway_base, executed into a namespace of its own in this process
        send = getattr(type(channel), "send", None)
        space = getattr(send, "__globals__", None)
        if isinstance(space, dict):
            _namespace(rec, "execnet", space, space.get("__name__"))
    rec.instances.append(_instance("the server", server))
    if adapter is not None:
        _inherited(rec, type(adapter))
        rec.instances.append(_instance("the adapter", adapter))
        rec.bound.append(("the server's adapter", vars(server), "adapter", adapter))
    return rec.freeze()


def _inherited(rec: Record, cls: type) -> None:
    """The adapter is composed of classes (one per area, ``layerside/<framework>/``) and their protocols: a name
    bound on one of them that a class after it in the MRO defines (``FrameworkAdapter.call = ...``) changes what
    the adapter runs, so each harness class of the MRO is recorded without the names it inherits."""
    own = [k for k in cls.__mro__ if k.__module__.startswith("layer_conformance.")]
    names = {n for k in own for n in vars(k) if n not in ("__dict__", "__weakref__", "__doc__", "__module__",
                                                          "__annotations__", "__qualname__")}
    for k in own:
        space = k.__dict__
        for attr in sorted(names.difference(space)):
            rec.absent.append((f"{k.__module__}.{k.__qualname__}.{attr}", space, attr))


_CODE, _DEFAULTS, _GLOBALS, _MRO = (attrgetter(a) for a in ("__code__", "__defaults__", "__globals__", "__mro__"))


def _unchanged(rec: Record, deep: bool) -> bool:
    """Whether nothing ``changes`` looks at differs, by identity, in loops that run in C (a few hundredths of a
    millisecond); False sends ``changes`` to its slower loop, which says what. ``deep``: the functions' code and
    defaults too. Reading ``__code__``, ``__defaults__`` or ``__kwdefaults__`` raises an audit event, and the
    process that runs code under test has an audit hook (server.FileRecorder): reading them for every function
    after every request cost 0.6 ms a request, so that is done at the end of the check."""
    names, modules, spaces, functions, codes, defaults, globs, others, classes, mros, absent = rec.fast
    get = sys.modules.get
    if any(map(is_not, map(get, names), modules)):
        return False
    try:
        for space, getter, values, single in spaces:
            if any(map(is_not, (getter(space),) if single else getter(space), values)):
                return False
    except KeyError:  # a name deleted
        return False
    if any(map(is_not, map(_MRO, classes), mros)):
        return False
    for space, attrs in absent:
        if any(map(space.__contains__, attrs)):
            return False
    # a function's __globals__ is read-only (only native code changes it): looked at with the code
    if deep and (any(map(is_not, map(_CODE, functions), codes)) or any(map(is_not, map(_DEFAULTS, functions),
                                                                             defaults))
                 or any(map(is_not, map(_GLOBALS, functions), globs))):
        return False
    for _, f, _, _, _, kw, _, cells in others:  # keyword defaults and closures: a few functions have them
        if (deep and not _same_items(f.__kwdefaults__, kw)) or (
                cells and any(map(is_not, map(_cell, f.__closure__ or ()), cells))):
            return False
    for label, obj, cls, shadowable, bound in rec.instances:
        if type(obj) is not cls or any(n in shadowable and bound.get(n, _EMPTY) is not v
                                       for n, v in getattr(obj, "__dict__", {}).items()):
            return False
    return True


def _module(rec: Record, name: str, module) -> None:
    space = getattr(module, "__dict__", None)
    if isinstance(space, dict):
        _namespace(rec, name, space, name)


def _namespace(rec: Record, label: str, space: dict, own: str | None) -> None:
    """A module's namespace: each name bound to a function, class, module or constant; the functions and
    classes defined there (``__module__`` ``own``) in depth."""
    for attr, value in list(space.items()):
        if attr.startswith("__") and attr.endswith("__"):
            continue
        if isinstance(value, types.FunctionType):
            rec.bound.append((f"{label}.{attr}", space, attr, value))
            if getattr(value, "__module__", None) == own:
                _function(rec, f"{label}.{attr}", value)
        elif isinstance(value, type):
            rec.bound.append((f"{label}.{attr}", space, attr, value))
            if value.__module__ == own and value.__qualname__ == attr:
                _class(rec, f"{label}.{attr}", value)
        elif isinstance(value, (types.ModuleType, types.BuiltinFunctionType)) or type(value) in _CONSTANT:
            rec.bound.append((f"{label}.{attr}", space, attr, value))
        elif callable(value):  # a functools.lru_cache or partial object: itself, and the function it wraps
            rec.bound.append((f"{label}.{attr}", space, attr, value))
            _wrapped(rec, f"{label}.{attr}", value, own)


def _wrapped(rec: Record, label: str, value, own: str | None) -> None:
    try:
        inner = vars(value).get("__wrapped__") if hasattr(value, "__dict__") else None
    except TypeError:
        inner = None
    if isinstance(inner, types.FunctionType) and inner.__module__ == own:
        _function(rec, label, inner)


def _class(rec: Record, label: str, cls: type) -> None:
    rec.mros.append((label, cls, cls.__mro__))
    space = cls.__dict__
    for attr, value in list(space.items()):
        if attr in ("__dict__", "__weakref__", "__doc__", "__module__", "__annotations__"):
            continue
        where = f"{label}.{attr}"
        if isinstance(value, types.FunctionType):
            rec.bound.append((where, space, attr, value))
            _function(rec, where, value)
        elif isinstance(value, (staticmethod, classmethod)):
            rec.bound.append((where, space, attr, value))
            if isinstance(value.__func__, types.FunctionType):
                _function(rec, where, value.__func__)
        elif isinstance(value, property):
            rec.bound.append((where, space, attr, value))
            for part in (value.fget, value.fset, value.fdel):
                if isinstance(part, types.FunctionType):
                    _function(rec, where, part)
        elif type(value) in _CONSTANT or isinstance(value, type):
            rec.bound.append((where, space, attr, value))
        elif callable(value) or hasattr(type(value), "__get__"):  # a cached_property, an lru_cache object
            rec.bound.append((where, space, attr, value))
            _wrapped(rec, where, getattr(value, "func", value), cls.__module__)


def _function(rec: Record, label: str, f: types.FunctionType) -> None:
    code = f.__code__
    kw = f.__kwdefaults__
    cells = tuple(_cell(c) for c in (f.__closure__ or ()))
    rec.functions.append((label, f, code, _digest(code), f.__defaults__, _items(kw), f.__globals__, cells))


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:  # empty
        return _EMPTY


_EMPTY = object()


def _items(d):
    return None if d is None else (tuple(d), tuple(d.values()))


def _same_items(d, kw) -> bool:
    """Whether ``d`` (a function's ``__kwdefaults__``) holds the names and the very objects ``_items`` took."""
    if d is None or kw is None:
        return d is None and kw is None
    return tuple(d) == kw[0] and len(d) == len(kw[1]) and not any(map(is_not, d.values(), kw[1]))


def _digest(code) -> int:
    """A digest of what a code object runs: its bytecode (CRC-32), constants and names (their hash; a nested code
    object's hash covers its own bytecode, constants and names). A tenth of a millisecond for all the functions
    watched. Code objects are immutable from Python, so a change of a function's code is its ``__code__``
    replaced, which identity sees; the digest is a second look, and names native code that rewrites bytecode in
    place only as far as CPython executes ``co_code`` itself (3.11 and later run an adaptive copy of it)."""
    return zlib.crc32(code.co_code) ^ hash((code.co_consts, code.co_names))


def _instance(label: str, obj):
    cls = type(obj)
    shadowable = {n for k in cls.__mro__ for n, v in vars(k).items() if callable(v) or isinstance(v, (staticmethod, classmethod, property))}
    space = getattr(obj, "__dict__", {})
    return (label, obj, cls, shadowable, {n: v for n, v in space.items() if n in shadowable})


def changes(rec: Record | None, full: bool = False) -> list[str]:
    """What differs from ``rec``: one phrase per change ("layer_conformance.wire.encode replaced (by ...)");
    empty when nothing does. Without ``full``, what a name is bound to, the functions' globals and closures,
    the classes' MROs and the instances (not the functions' code and defaults: see ``_unchanged``); ``full``:
    everything, each code object's digest computed again included."""
    if rec is None:
        return []
    out = []
    if full:
        if [_digest(f[2]) for f in rec.functions] != [f[3] for f in rec.functions]:
            out += [f"{f[0]}: its bytecode changed" for f in rec.functions if f[1].__code__ is f[2] and
                    _digest(f[2]) != f[3]]
    if not out and rec.fast is not None and _unchanged(rec, deep=full):
        return []
    for name, module in rec.modules:
        if sys.modules.get(name) is not module:
            out.append(f"sys.modules[{name!r}] replaced")
    for label, space, attr, value in rec.bound:
        now = space.get(attr, _EMPTY)
        if now is not value:
            out.append(f"{label} deleted" if now is _EMPTY else f"{label} replaced ({_what(now)})")
    for label, space, attr in rec.absent:
        if attr in space:
            out.append(f"{label} replaced ({_what(space[attr])})")
    for label, f, code, digest, defaults, kw, glob, cells in rec.functions:
        if f.__code__ is not code:
            out.append(f"{label}: its code replaced ({_where(f.__code__)})")
        if f.__defaults__ is not defaults:
            out.append(f"{label}: its defaults replaced")
        if not _same_items(f.__kwdefaults__, kw):
            out.append(f"{label}: its keyword defaults changed")
        if f.__globals__ is not glob:
            out.append(f"{label}: its globals replaced")
        if cells:
            now = tuple(_cell(c) for c in (f.__closure__ or ()))
            if len(now) != len(cells) or any(a is not b for a, b in zip(now, cells)):
                out.append(f"{label}: a variable of its closure changed")
    for label, cls, mro in rec.mros:
        if cls.__mro__ != mro or any(a is not b for a, b in zip(cls.__mro__, mro)):
            out.append(f"{label}: its base classes changed")
    for label, obj, cls, shadowable, bound in rec.instances:
        if type(obj) is not cls:
            out.append(f"{label}'s class replaced ({_what(type(obj))})")
        space = getattr(obj, "__dict__", {})
        for name, value in space.items():
            if name in shadowable and bound.get(name, _EMPTY) is not value:
                out.append(f"{cls.__module__}.{cls.__qualname__}.{name} replaced on {label} ({_what(value)})")
    return out


def seen(rec: Record | None) -> None:
    """After each request, before its answer is encoded: what differs now is kept for the end of the check
    (``ended``), even if the code under test puts it back before then (the bindings, without the functions' code
    and defaults: a tenth of a millisecond)."""
    if rec is not None:
        for change in changes(rec):
            if change not in rec.seen:
                rec.seen.append(change)


def ended(rec: Record | None) -> list[str]:
    """At the end of a check: what differs now (each code object's digest computed again too) and what
    differed at any request of the check; the record starts the next check empty."""
    if rec is None:
        return []
    found = list(rec.seen)
    found += [c for c in changes(rec, full=True) if c not in found]
    rec.seen = []
    return found


def _what(obj) -> str:
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)
    name = getattr(obj, "__qualname__", None) or type(obj).__name__
    if isinstance(code, types.CodeType):
        return f"by {name} {_where(code)}"
    return f"by {name}" if isinstance(name, str) else "by another object"


def _where(code) -> str:
    return f"at {code.co_filename}:{code.co_firstlineno}"
