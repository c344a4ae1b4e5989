"""What crosses between the judge and an executor: plain data and the protocol's typed requests and replies.

Arrays travel as ``numpy.save`` bytes; a request (one frozen dataclass per protocol method, registered with
``request``) or a reply (a frozen dataclass the protocol registers with ``reply``) travels as its registered name
and its fields, each encoded in turn; anything else that is not plain data (a layer, a native tensor, a function)
stays in the executor's process and travels as a handle. Both sides import this module, so it needs numpy alone.
"""
from __future__ import annotations

import dataclasses
import io

import numpy as np

PLAIN = (type(None), bool, int, float, complex, str, bytes)


# dtypes numpy.save cannot write without pickle (ml_dtypes' bfloat16): sent as their same-width unsigned
# view after a tag naming the dtype (an .npy file itself starts with b"\x93NUMPY", never with a tag)
_VIEWED = {"bfloat16": np.uint16}
_TAG = b"dtype:"


def array_to_bytes(a) -> bytes:
    a = np.asarray(a)
    buf = io.BytesIO()
    name = a.dtype.name
    if name in _VIEWED:
        buf.write(_TAG + name.encode() + b"\n")
        a = a.view(_VIEWED[name])
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def array_from_bytes(b: bytes):
    name = None
    if b.startswith(_TAG):
        head, _, b = b.partition(b"\n")
        name = head[len(_TAG):].decode()
    a = np.load(io.BytesIO(b), allow_pickle=False)
    if name is not None:  # ml_dtypes is a dependency of both environments
        import ml_dtypes
        a = a.view(getattr(ml_dtypes, name))
    return a


class WireError(TypeError):
    """What arrived is not what the protocol declares: an unknown request or reply type, or one with unknown or
    missing fields (the two sides' protocols differ, or the message was forged)."""


# stable name ("compile.CompileStats", "request.vjp") -> type, and back: filled by ``reply`` and ``request`` as the
# protocol is imported; the two kinds are kept apart, so that neither can arrive where the other is expected
_REPLIES: dict[str, type] = {}
_REQUESTS: dict[str, type] = {}
_NAMES: dict[type, tuple[str, str]] = {}   # type -> (its key on the wire, its name)
_KEYS = {"__reply__": ("reply", _REPLIES), "__request__": ("request", _REQUESTS)}


def _registrar(key: str, name: str):
    kind, table = _KEYS[key]

    def register(cls):
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"a {kind} type is a frozen dataclass: {cls.__qualname__} is not")
        known = table.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"the {kind} name {name!r} is {known.__module__}.{known.__qualname__}'s already")
        table[name] = cls
        _NAMES[cls] = (key, name)
        return cls
    return register


def reply(name: str):
    """Register a frozen dataclass as a reply that crosses the boundary under ``name`` ("<area>.<Type>")."""
    return _registrar("__reply__", name)


def request(name: str):
    """Register a frozen dataclass as a request that crosses the boundary under ``name`` ("request.<method>")."""
    return _registrar("__request__", name)


def reply_types() -> dict[str, type]:
    """Every registered reply type, by its name on the wire."""
    return dict(_REPLIES)


def request_types() -> dict[str, type]:
    """Every registered request type, by its name on the wire."""
    return dict(_REQUESTS)


def encode(value, handle_of):
    """``value`` as execnet-serialisable data; ``handle_of(obj)`` encodes what is not data."""
    if isinstance(value, np.generic) and not isinstance(value, np.object_):  # before PLAIN: float64 is a float
        return {"__np__": array_to_bytes(np.asarray(value))}
    if type(value) in PLAIN:
        return value
    if isinstance(value, np.ndarray) and value.dtype != object:
        return {"__nd__": array_to_bytes(value)}
    if type(value) in (list, tuple) or (isinstance(value, tuple) and type(value).__name__ == "Size"):
        items = [encode(v, handle_of) for v in value]
        return items if type(value) is list else {"__tuple__": items}
    if type(value) is dict and all(isinstance(k, (str, int)) for k in value):
        return {"__dict__": [[k, encode(v, handle_of)] for k, v in value.items()]}
    named = _NAMES.get(type(value))
    if named is not None:
        return {named[0]: named[1],
                "fields": [[f.name, encode(getattr(value, f.name), handle_of)] for f in dataclasses.fields(value)]}
    return handle_of(value)


def decode(value, object_of):
    """The inverse of ``encode``; ``object_of(data)`` turns an encoded handle back into an object."""
    if isinstance(value, list):
        return [decode(v, object_of) for v in value]
    if not isinstance(value, dict):
        return value
    if "__nd__" in value:
        return array_from_bytes(value["__nd__"])
    if "__np__" in value:
        return array_from_bytes(value["__np__"])[()]
    if "__tuple__" in value:
        return tuple(decode(v, object_of) for v in value["__tuple__"])
    if "__dict__" in value:
        return {k: decode(v, object_of) for k, v in value["__dict__"]}
    for key in _KEYS:
        if key in value:
            return _decode_typed(key, value, object_of)
    return object_of(value)


def _decode_typed(key: str, value: dict, object_of):
    """A registered request or reply type from its name and fields: exactly the type's fields, each decoded."""
    kind, table = _KEYS[key]
    name = value[key]
    cls = table.get(name) if isinstance(name, str) else None
    if cls is None:
        known = "no protocol method has that name" if kind == "request" else \
            f"known: {', '.join(sorted(table)) or 'none'}"
        raise WireError(f"an unknown {kind} type {name!r} arrived ({known})")
    given = dict(value.get("fields") or [])
    want = [f.name for f in dataclasses.fields(cls)]
    unknown, missing = sorted(set(given) - set(want)), [f for f in want if f not in given]
    if unknown or missing:
        raise WireError(f"a {name} arrived with " + " and ".join(
            ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
            + ([f"missing field(s) {', '.join(missing)}"] if missing else [])))
    return cls(**{k: decode(given[k], object_of) for k in want})
