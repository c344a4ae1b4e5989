"""MXNet Gluon 1.9.1: building, calling and holding a layer (detection, tensors, state, containers, devices, the
process's global state), and the helpers the other areas of this folder share.

MXNet 1.9.1 needs numpy<2 and, on numpy >= 1.24,
``layer_conformance.layerside.mxnet_shim.apply()`` before the first ``import mxnet`` (user modules that
import mxnet themselves must call it first too). Works with legacy ``mx.nd`` arrays and, after ``npx.set_np()``, ``mx.np`` arrays.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect
import os
import re
import tempfile
import warnings

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable
from ...protocol.core import CoreProtocol
from ..common import walk_attributes


# Bookkeeping attributes of every Block (registered state lives in them).
_BLOCK_INTERNALS = frozenset(vars(gluon.HybridBlock()))


def _context(device):
    if device is None:
        return mx.cpu(0)
    kind, index = re.fullmatch(r"(\w+)\((\d+)\)", device).groups()
    return mx.Context(kind, int(index))


# dtypes MXNet 1.9.1 does not have, and why (a check in one of them reads n/a)
_NO_DTYPE = {"bfloat16": "MXNet 1.9.1 has no bfloat16 for Gluon layers: mx.nd.array silently makes a bfloat16 "
                         "array float32, and its own bfloat16 (a oneDNN inference type) is refused by "
                         "Block.cast and astype"}


def _array(value, ctx=None, dtype=None):
    """An array of the kind the process uses (``mx.np`` after npx.set_np, else ``mx.nd``)."""
    value = np.asarray(value)
    if value.dtype.name in _NO_DTYPE:
        raise NotApplicable(_NO_DTYPE[value.dtype.name], code="no_dtype")
    if value.ndim == 0 and not mx.util.is_np_shape():
        # legacy operators read shape () as "unknown" and refuse it; their scalar is shape (1,),
        # the shape nd.sum returns
        value = value.reshape(1)
    make = mx.np.array if mx.util.is_np_array() else mx.nd.array
    # both default to float32 whatever the source dtype: pass it explicitly
    return make(value, ctx=ctx or mx.cpu(0), dtype=dtype or value.dtype)


def _dense(n_in, n_out, rng):
    """A built-in Dense with seeded weights (flatten=False keeps leading axes, as torch's Linear)."""
    dense = gluon.nn.Dense(n_out, in_units=n_in, flatten=False)
    dense.initialize(ctx=mx.cpu(0))
    for p in dense.collect_params().values():
        p.set_data(_array(rng.standard_normal(p.shape) * 0.3, dtype=p.dtype))
    return dense


class MXNetCore(CoreProtocol):
    name = "mxnet"
    parameter_type = "gluon.Parameter"
    module = "mxnet"
    cpu_device = "cpu(0)"
    gpu_device = "gpu(0)"

    def owns(self, obj) -> bool:
        if inspect.isclass(obj):
            return issubclass(obj, (gluon.Block, autograd.Function))
        if isinstance(obj, (gluon.Block, autograd.Function, mx.nd.NDArray)):
            return True
        return (getattr(obj, "__module__", "") or "").split(".")[0] == "mxnet"

    def devices(self):
        # cpu(1) is a distinct context, so moves can be checked without a GPU
        return ["cpu(1)"] + (["gpu(0)"] if mx.context.num_gpus() > 0 else [])

    # -- tensors -----------------------------------------------------------------------
    def tensor(self, array, device=None):
        return _array(array, _context(device))

    def numpy(self, t):
        if isinstance(t, gluon.Parameter):
            t = t.data(t.list_ctx()[0])
        if not isinstance(t, mx.nd.NDArray):
            raise TypeError(f"expected an MXNet array, got {type(t).__name__}")
        return t.asnumpy()

    def is_tensor(self, obj):
        return isinstance(obj, mx.nd.NDArray)

    def dtype_name(self, t):
        return np.dtype(t.dtype).name

    def device_of(self, t):
        return ",".join(map(str, t.list_ctx())) if isinstance(t, gluon.Parameter) else str(t.ctx)

    # -- building and calling ----------------------------------------------------------------
    def as_callable(self, obj):
        # A Function instance can be called only once: a fresh one per call.
        if inspect.isclass(obj) and issubclass(obj, autograd.Function):
            def apply(*args):
                return obj()(*args)
            apply.__name__ = apply.__qualname__ = f"{obj.__name__}()"
            apply.function = obj  # what aliased_vjp asks
            return apply
        return obj

    def build(self, layer, inputs, device=None, kwargs=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "already initialized" when the layer did it itself
            layer.initialize(ctx=_context(device))
        try:
            self.call(layer, inputs, device=device, kwargs=kwargs)
        except Exception:
            # An unregistered Parameter is never initialized, so the first call fails; the
            # registration checks name it, and every check that calls the layer fails as before.
            if not self.untracked(layer):
                raise
        return layer

    def call(self, layer, inputs, device=None, training=False, kwargs=None):
        ctx = _context(device)
        args = [a if isinstance(a, mx.nd.NDArray) else _array(a, ctx) for a in inputs]
        if not isinstance(layer, gluon.Block):
            return layer(*args, **(kwargs or {}))
        with autograd.train_mode() if training else autograd.predict_mode():
            return layer(*args, **(kwargs or {}))

    # -- state ---------------------------------------------------------------------------
    def _named(self, layer) -> dict:
        """Every parameter collect_params() holds, by its structural name (``gain``, ``0.weight``:
        the save_parameters keys), not the prefixed global name slot matching cannot use."""
        if not isinstance(layer, gluon.Block):
            return {}
        structural = {id(p): n for n, p in layer._collect_params_with_prefix().items()}
        out = {}
        for global_name, p in layer.collect_params().items():
            # not reachable through attributes (so not saved): its name without the block prefix
            out[structural.get(id(p)) or global_name.replace(layer.prefix, "", 1)] = p
        return out

    def trainable(self, layer):
        return {n: p for n, p in self._named(layer).items() if p.grad_req != "null"}

    def non_trainable(self, layer):
        return {n: p for n, p in self._named(layer).items() if p.grad_req == "null"}

    def optimizer_view(self, layer):
        # A Trainer is handed collect_params() and updates those with a gradient
        return [p for p in layer.collect_params().values() if p.grad_req != "null"]

    def untracked(self, layer):
        registered = {id(p) for p in layer.collect_params().values()}

        def is_state(v):
            return isinstance(v, mx.nd.NDArray) or (isinstance(v, gluon.Parameter) and id(v) not in registered)

        def children(v):
            return v._children.items() if isinstance(v, gluon.Block) else None

        def describe(v):
            kind = "gluon.Parameter" if isinstance(v, gluon.Parameter) else type(v).__name__
            return f"{kind} {list(v.shape)}"

        return walk_attributes(layer, is_state, children, describe=describe, internal=_BLOCK_INTERNALS)

    def assign(self, layer, name, value):
        p = self._named(layer)[name]
        p.set_data(_array(value, p.list_ctx()[0], dtype=p.dtype))

    def serialized_state(self, layer):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "layer.params")
            layer.save_parameters(path)
            loaded = (mx.npx.load if mx.util.is_np_array() else mx.nd.load)(path)
        return {k: v.asnumpy() for k, v in (loaded or {}).items()}  # an empty file loads as []

    @staticmethod
    def _file_block(layer):
        # 1.9.1 loads a file whose keys have no '.' (a block with only direct parameters) by a
        # legacy path that fails under npx.set_np(); inside a container the keys get one.
        if not mx.util.is_np_array():
            return layer
        container = gluon.nn.Sequential()
        container.add(layer)
        return container

    def export_state(self, layer):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "layer.params")
            self._file_block(layer).save_parameters(path)
            with open(path, "rb") as f:
                return f.read()

    def load_state(self, layer, saved, strict=True):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "layer.params")
            with open(path, "wb") as f:
                f.write(saved)
            self._file_block(layer).load_parameters(path, ctx=mx.cpu(0), allow_missing=not strict,
                                                    ignore_extra=not strict)
        return layer

    def round_trip(self, layer, fresh):
        return self.load_state(fresh, self.export_state(layer), strict=True)

    def alter_saved(self, layer, saved, drop=None, add=None):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "layer.params")
            with open(path, "wb") as f:
                f.write(saved)
            loaded = dict((mx.npx.load if mx.util.is_np_array() else mx.nd.load)(path) or {})
            prefix = "0." if self._file_block(layer) is not layer else ""  # the container's key prefix
            if drop is not None:
                loaded.pop(prefix + drop)
            if add is not None:
                loaded[prefix + add] = _array(np.zeros(1, dtype=np.float32))
            (mx.npx.save if mx.util.is_np_array() else mx.nd.save)(path, loaded)
            with open(path, "rb") as f:
                return f.read()

    # -- composition and devices ---------------------------------------------------------------
    def sequential(self, layer, width):
        rng = np.random.default_rng(0)
        net = gluon.nn.Sequential()
        net.add(_dense(width, width, rng), layer, _dense(width, 2, rng))
        return net

    def nest(self, layer, dense=None):
        net = gluon.nn.Sequential()
        if dense is not None:
            net.add(_dense(*dense, np.random.default_rng(0)))
        net.add(layer)
        return net

    def manual_seed(self, seed):
        mx.random.seed(seed)

    def move(self, layer, device, rebuild=None):
        layer.collect_params().reset_ctx(_context(device))
        return layer

    def save_globals(self):
        return {"numpy semantics (npx.set_np)": (mx.util.is_np_shape(), mx.util.is_np_array()),
                "autograd recording": autograd.is_recording(), "autograd training": autograd.is_training()}

    def restore_globals(self, saved):
        now = self.save_globals()
        shape, array = saved["numpy semantics (npx.set_np)"]
        mx.util.set_np(shape=shape, array=array) if shape or array else mx.util.reset_np()
        autograd.set_recording(saved["autograd recording"])
        autograd.set_training(saved["autograd training"])
        return [f"mxnet {k}" for k in saved if now[k] != saved[k]]
