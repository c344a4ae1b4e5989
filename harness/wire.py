"""What crosses between the judge and an executor: plain data and the protocol's typed replies.

Arrays travel as ``numpy.save`` bytes; a reply (a frozen dataclass the protocol registers with ``reply``) travels
as its registered name and its fields, each encoded in turn; anything else that is not plain data (a layer, a
native tensor, a function) stays in the executor's process and travels as a handle. Both sides import this
module, so it needs numpy alone.
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
    """What arrived is not what the protocol declares: an unknown reply type, or a reply with unknown or missing
    fields (the two sides' protocols differ, or the answer was forged)."""


# stable name ("compile.CompileStats") -> reply type, and back: filled by ``reply`` as the protocol is imported
_REPLIES: dict[str, type] = {}
_NAMES: dict[type, str] = {}


def reply(name: str):
    """Register a frozen dataclass as a reply that crosses the boundary under ``name`` ("<area>.<Type>")."""
    def register(cls):
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"a reply type is a frozen dataclass: {cls.__qualname__} is not")
        known = _REPLIES.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"the reply name {name!r} is {known.__module__}.{known.__qualname__}'s already")
        _REPLIES[name] = cls
        _NAMES[cls] = name
        return cls
    return register


def reply_types() -> dict[str, type]:
    """Every registered reply type, by its name on the wire."""
    return dict(_REPLIES)


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
    name = _NAMES.get(type(value))
    if name is not None:
        return {"__reply__": name,
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
    if "__reply__" in value:
        return _decode_reply(value, object_of)
    return object_of(value)


def _decode_reply(value: dict, object_of):
    """A registered reply type from its name and fields: exactly the type's fields, each decoded."""
    name = value["__reply__"]
    cls = _REPLIES.get(name)
    if cls is None:
        raise WireError(f"an unknown reply type {name!r} arrived (known: {', '.join(sorted(_REPLIES)) or 'none'})")
    given = dict(value.get("fields") or [])
    want = [f.name for f in dataclasses.fields(cls)]
    unknown, missing = sorted(set(given) - set(want)), [f for f in want if f not in given]
    if unknown or missing:
        raise WireError(f"a {name} arrived with " + " and ".join(
            ([f"unknown field(s) {', '.join(unknown)}"] if unknown else [])
            + ([f"missing field(s) {', '.join(missing)}"] if missing else [])))
    return cls(**{k: decode(given[k], object_of) for k in want})
