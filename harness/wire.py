"""What crosses between the judge and an executor: plain data only.

Arrays travel as ``numpy.save`` bytes; anything else that is not plain data (a layer, a native
tensor, a function) stays in the executor's process and travels as a handle. Both sides import
this module, so it needs numpy alone.
"""
from __future__ import annotations

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
    return object_of(value)
