"""The judge's proxies for what lives in an executor: handles to its objects, the adapter whose every protocol
method the executor answers, and a contract's reference module run in the numpy-only executor."""
from __future__ import annotations

import functools

from .. import protocol, wire


class Remote:
    """A handle to an object that stays in an executor. Tensors carry their shape, dtype, device
    and (when the executor could read them) values, so most questions need no round trip."""

    def __init__(self, executor, hid: int, type_name: str):
        self.executor, self.hid, self.remote_type = executor, hid, type_name
        self.meta: dict = {}
        self.value = None
        self.generation = -1

    def update(self, meta: dict):
        self.meta = {k: v for k, v in meta.items() if k != "value"}
        self.value = wire.array_from_bytes(meta["value"]) if "value" in meta else None
        self.generation = self.executor.generation

    @property
    def fresh(self) -> bool:
        return self.generation == self.executor.generation

    @property
    def shape(self):
        if "shape" not in self.meta:
            raise AttributeError(f"a {self.remote_type} has no shape")
        return tuple(self.meta["shape"])

    def __repr__(self):
        return f"<{self.remote_type} in the {self.executor.role} executor>"


class Rebuild:
    """A fresh layer with given state, built inside the executor when an adapter needs one."""

    def __init__(self, impl: Remote, constructor: dict, inputs: list, assign: dict):
        self.spec = {"impl": impl, "constructor": constructor, "inputs": inputs, "assign": assign}


class RemoteAdapter(protocol.Adapter):
    """The protocols' methods (``protocol.Adapter``), each answered by an executor: checks cannot tell it from a
    local adapter, but for handles where the local one returns native objects. A call goes as the method's request
    type (``protocol.request``: a call that does not fit the signature raises TypeError here, before anything is
    sent); replies arrive as the protocol's reply types (``wire`` decodes them); a method no protocol declares is
    no attribute of it."""

    def __init__(self, executor, native=None):  # client.Executor: the layer's, and the native one
        self._executor = executor
        self._native = native
        hello = executor.hello
        self.name = hello["name"]
        self.cpu_device = hello["cpu_device"]
        self.gpu_device = hello["gpu_device"]
        self.retraces_per_shape = hello["retraces_per_shape"]
        self.parameter_type = hello["parameter_type"]
        self.immutable_arrays = hello.get("immutable_arrays")
        self._implements = set(hello["implements"])

    def implements(self, method: str) -> bool:
        return method in self._implements

    def _owner(self, args):
        for a in args:
            if isinstance(a, Remote):
                return a.executor
            if isinstance(a, (list, tuple)):
                for b in a:
                    if isinstance(b, Remote):
                        return b.executor
        return self._executor

    def _call(self, method, args, kwargs):
        return self._owner(args).request("call", request=protocol.request(method, *args, **kwargs))

    # answered from what a tensor handle already carries, where it is current
    def is_tensor(self, obj) -> bool:
        if isinstance(obj, Remote):
            return bool(obj.meta.get("tensor")) if obj.fresh else self._call("is_tensor", [obj], {})
        return False

    def numpy(self, t):
        if isinstance(t, Remote) and t.fresh and t.value is not None:
            return t.value.copy()
        return self._call("numpy", [t], {})

    def dtype_name(self, t) -> str:
        if isinstance(t, Remote) and t.fresh and "dtype" in t.meta:
            return t.meta["dtype"]
        return self._call("dtype_name", [t], {})

    def device_of(self, t) -> str:
        if isinstance(t, Remote) and t.fresh and "device" in t.meta:
            return t.meta["device"]
        return self._call("device_of", [t], {})

    def import_native(self, path: str) -> Remote:
        """A contract's native layer or function, in an executor that never imported user code."""
        return self._native.request("import_object", path=path)


def _answered_remotely(method: str):
    """The protocols' ``method``, answered by the executor that holds its arguments' handles (or the layer's)."""
    def call(self, *args, **kwargs):
        return self._call(method, args, kwargs)
    functools.update_wrapper(call, getattr(protocol.Adapter, method))  # its docstring, signature and reply type
    call.__qualname__ = f"RemoteAdapter.{method}"
    return call


for _method in protocol.methods():
    if _method not in vars(RemoteAdapter):
        setattr(RemoteAdapter, _method, _answered_remotely(_method))


class RemoteModule:
    """A contract's reference module, run in the numpy-only reference executor. Answers are
    deterministic, so each distinct call is made once."""

    def __init__(self, executor, name: str):  # client.Executor: the reference one
        self._executor, self._name = executor, name
        self._cache: dict = {}

    def __getattr__(self, function):
        if function.startswith("_"):
            raise AttributeError(function)

        def call(*args, **kwargs):
            key = (function, _call_key([list(args), kwargs]))
            if key not in self._cache:
                self._cache[key] = self._executor.request("reference", module=self._name, function=function,
                                                          args=list(args), kwargs=kwargs)
            value = self._cache[key]
            return value.copy() if hasattr(value, "copy") else value
        call.__name__ = function
        return call


def reference_in_dtype(module: RemoteModule, function: str, dtype: str, args: list, kwargs: dict,
                       accumulate: str | None = None) -> tuple:
    """``module``'s ``function`` run in ``dtype`` below float64 in the reference executor: (its result, rounded to
    the dtype, as float64; how it ran there); each distinct call made once. ``accumulate``: the contract's, the
    precision the emulation holds statistics in (layerside/rounding.py)."""
    key = ("in_dtype", function, dtype, accumulate, _call_key([list(args), kwargs]))
    if key not in module._cache:
        module._cache[key] = module._executor.request("reference_in_dtype", module=module._name, function=function,
                                                      dtype=dtype, args=list(args), kwargs=kwargs,
                                                      accumulate=accumulate)
    return module._cache[key]


def _no_handles(obj):
    raise TypeError(f"a {type(obj).__name__} cannot be passed to a reference")


def _call_key(value) -> bytes:
    """A digest of a reference call's arguments: arrays are hashed where they lie, never copied (a key made of
    their encoded bytes' repr held about four times every input, per call, for the run)."""
    import hashlib

    import numpy as np
    h = hashlib.sha256()

    def feed(v):
        if isinstance(v, (np.ndarray, np.generic)) and np.asarray(v).dtype != object:
            a = np.ascontiguousarray(v)
            h.update(f"nd:{a.dtype.name}:{a.shape}:{isinstance(v, np.generic)}:".encode())
            h.update(a.view(np.uint8).reshape(-1) if a.size else b"")
        elif type(v) in (list, tuple) or (isinstance(v, tuple) and type(v).__name__ == "Size"):
            h.update(f"{type(v).__name__}:{len(v)}[".encode())
            for item in v:
                feed(item)
            h.update(b"]")
        elif type(v) is dict and all(isinstance(k, (str, int)) for k in v):
            h.update(f"dict:{len(v)}{{".encode())
            for k, item in v.items():
                h.update(repr(k).encode() + b"=")
                feed(item)
            h.update(b"}")
        elif type(v) in wire.PLAIN:
            h.update(f"{type(v).__name__}:{v!r};".encode())
        else:
            _no_handles(v)
    feed(value)
    return h.digest()
