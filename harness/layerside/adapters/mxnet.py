"""MXNet Gluon 1.9.1 adapter.

MXNet 1.9.1 needs numpy<2 and, on numpy >= 1.24,
``layer_conformance.layerside.adapters.mxnet_shim.apply()`` before the first ``import mxnet`` (user modules that
import mxnet themselves must call it first too). Works with legacy ``mx.nd`` arrays and, after ``npx.set_np()``, ``mx.np`` arrays.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import os
import re
import tempfile
import warnings

import numpy as np

from .mxnet_shim import apply as _apply_shim

_apply_shim()
import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402

from .base import Adapter, NotApplicable, import_spec  # noqa: E402
from .walk import walk_attributes  # noqa: E402

# Bookkeeping attributes of every Block (registered state lives in them).
_BLOCK_INTERNALS = frozenset(vars(gluon.HybridBlock()))


def _said(exc) -> str:
    """'Type: message' in one line; for MXNet's C++ errors (a traceback of the engine's frames, then the
    message), the message."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        lines = [lines[-1].removeprefix(f"{type(exc).__name__}: ")]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _first_unknown(out, given, prefix="") -> str | None:
    """The first node of the graph ``out`` whose output shape infer_shape leaves unknown (empty, or with a 0:
    MXNet's unknown dimension) from the input shapes ``given``: the operator that makes a shape depend on values
    (named without ``prefix``, the block's, which counts the blocks made in the process)."""
    internals = out.get_internals()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, shapes, _ = internals.infer_shape_partial(**given)
    except Exception:  # noqa: BLE001 - only the words of a message depend on it
        return None
    for name, shape in zip(internals.list_outputs(), shapes):
        if not shape or 0 in shape:
            return name.removesuffix("_output").removeprefix(prefix)
    return None


def _context(device):
    if device is None:
        return mx.cpu(0)
    kind, index = re.fullmatch(r"(\w+)\((\d+)\)", device).groups()
    return mx.Context(kind, int(index))


# dtypes MXNet 1.9.1 does not have, and why (a check in one of them reads n/a)
_NO_DTYPE = {"bfloat16": "MXNet 1.9.1 has no bfloat16 for Gluon layers: mx.nd.array silently makes a bfloat16 "
                         "array float32, and its own bfloat16 (a oneDNN inference type) is refused by "
                         "Block.cast and astype"}


def _contexts(param) -> list:
    try:
        return param.list_ctx()
    except (RuntimeError, AssertionError):  # not initialized yet: it will be, on the CPU by default
        return [mx.cpu(0)]


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


def _amp_dtype(t) -> str:
    """An array's dtype by name; MXNet's bfloat16 is a numpy structured type (('bfloat16', '<u2'))."""
    dt = np.dtype(t.dtype)
    return "bfloat16" if dt.names == ("bfloat16",) else dt.name


def _function_backward_error(printed: str) -> str:
    """The traceback mxnet printed for a raising Function.backward, as one line: the error and
    the deepest frame outside mxnet."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    frames = [line for line in lines if line.startswith("File ") and '.py"' in line and "site-packages" not in line]
    where = f" ({frames[-1]})" if frames else ""
    return f"autograd.Function.backward raised {lines[-1]}{where}"


def _dense(n_in, n_out, rng):
    """A built-in Dense with seeded weights (flatten=False keeps leading axes, as torch's Linear)."""
    dense = gluon.nn.Dense(n_out, in_units=n_in, flatten=False)
    dense.initialize(ctx=mx.cpu(0))
    for p in dense.collect_params().values():
        p.set_data(_array(rng.standard_normal(p.shape) * 0.3, dtype=p.dtype))
    return dense


class FrameworkAdapter(Adapter):
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

    def build(self, layer, inputs, device=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "already initialized" when the layer did it itself
            layer.initialize(ctx=_context(device))
        try:
            self.call(layer, inputs, device=device)
        except Exception:
            # An unregistered Parameter is never initialized, so the first call fails; the
            # registration checks name it, and every check that calls the layer fails as before.
            if not self.untracked(layer):
                raise
        return layer

    def call(self, layer, inputs, device=None, training=False):
        ctx = _context(device)
        args = [a if isinstance(a, mx.nd.NDArray) else _array(a, ctx) for a in inputs]
        if not isinstance(layer, gluon.Block):
            return layer(*args)
        with autograd.train_mode() if training else autograd.predict_mode():
            return layer(*args)

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

    # -- gradients -------------------------------------------------------------------------
    def custom_rule_recorded(self, fn, inputs, wrt):
        args = [a.copy() if isinstance(a, mx.nd.NDArray) else _array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        with autograd.record(train_mode=False):
            out = fn(*args)
        if not isinstance(out, mx.nd.NDArray):
            return None
        try:
            graph = json.loads(autograd.get_symbol(out).tojson())
        except mx.base.MXNetError:  # nothing recorded: the output depends on no input
            return False
        if not any(node["op"] == "_CustomFunction" for node in graph["nodes"]):  # a Function called as one
            return False
        # MXNet 1.9.1's Function writes no input gradient after the first input that wants none: the rule ran,
        # but what it returns never reaches those inputs, as if it had not run for them
        return not any(j not in wrt and j < max(wrt) for j in range(len(args))) if wrt else True

    def vjp(self, fn, layer, inputs, wrt, cotangent):
        args = [a.copy() if isinstance(a, mx.nd.NDArray) else _array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        state = {}
        if isinstance(layer, gluon.Block):
            state = {**self.non_trainable(layer), **self.trainable(layer)}
            layer.collect_params().zero_grad()  # Parameter.zero_grad fails under npx.set_np()
        with autograd.record(train_mode=False):
            out = fn(*args)
        if not isinstance(out, mx.nd.NDArray):
            raise TypeError(f"the output is a {type(out).__name__}, not an MXNet array")
        cotangent = np.asarray(cotangent)
        if cotangent.size == out.size:  # a scalar output is (1,) on legacy arrays, its cotangent ()
            cotangent = cotangent.reshape(out.shape)
        printed = io.StringIO()
        try:
            # a Function.backward that raises is only printed by mxnet; the engine's own error,
            # raised at the next read, names none of it
            with contextlib.redirect_stdout(printed):
                out.backward(_array(cotangent, out.ctx, dtype=out.dtype))
                mx.nd.waitall()
            input_grads = [self._grad_like(args[i].grad, inputs[i]) if i in wrt else None
                           for i in range(len(inputs))]
        except mx.base.MXNetError as exc:
            if "Error in Function.backward" in printed.getvalue():
                raise RuntimeError(_function_backward_error(printed.getvalue())) from None
            if "not in a computational graph" not in str(exc):
                raise
            input_grads = [None] * len(inputs)  # the output does not depend on any input
        print(printed.getvalue(), end="")  # what the layer itself printed
        state_grads = {n: None if p.grad_req == "null" else p.grad(p.list_ctx()[0]).copy()
                       for n, p in state.items()}
        return out, input_grads, state_grads

    @staticmethod
    def _grad_like(grad, x):
        # a 0-d input travelled as shape (1,) (see _array): its gradient goes back as numpy, 0-d
        if grad.shape != tuple(np.shape(x)) and grad.size == 1 and not np.shape(x):
            return grad.asnumpy().reshape(())
        return grad.copy()

    def jvp(self, fn, layer, inputs, tangents):
        raise NotApplicable("MXNet 1.9.1 has no forward-mode differentiation (autograd is reverse mode only)", code="no_forward_mode")

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        # measured: autograd.grad(create_graph=True) through an autograd.Function gives a gradient
        # outside the graph ("There are no inputs in computation graph that require gradients")
        raise NotApplicable("MXNet 1.9.1 cannot differentiate twice through autograd.Function (its backward "
                           "is not recorded) and many backward operators register no gradient", code="no_double_backward")

    _NO_VMAP = ("MXNet 1.9.1 has no vectorising transform (no vmap): only the comparison with examples run alone, "
                "permuted and changed runs")

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        raise NotApplicable(self._NO_VMAP, code="no_vmap")

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        raise NotApplicable(self._NO_VMAP, code="no_vmap")

    def aliased_vjp(self, fn, inputs, i, j, cotangent, compiled=None):
        if getattr(fn, "function", None) is not None:
            raise NotApplicable("an MXNet 1.9.1 autograd.Function gives no gradient at all to one array passed for "
                                "two of its inputs (a correct rule gets zeros: the framework's limitation, which "
                                "the layer cannot change)", code="function_alias_gradient")
        return super().aliased_vjp(fn, inputs, i, j, cotangent, compiled)

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        args = [_array(a) for a in inputs]
        before = [a.asnumpy().copy() for a in args]
        for i in wrt:
            args[i].attach_grad()
        if isinstance(layer, gluon.Block):
            layer.collect_params().zero_grad()
        changed = lambda: [i for i, (a, b) in enumerate(zip(args, before))
                           if not np.array_equal(a.asnumpy(), b, equal_nan=True)]
        with autograd.record(train_mode=False):
            out = fn(*args)
        forward = changed()
        backward, grads = [], [None] * len(inputs)
        if wrt and cotangent is not None and isinstance(out, mx.nd.NDArray):
            cotangent = np.asarray(cotangent)
            if cotangent.size == out.size:
                cotangent = cotangent.reshape(out.shape)
            try:
                out.backward(_array(cotangent, out.ctx, dtype=out.dtype))
                mx.nd.waitall()
                grads = [args[i].grad.copy() if i in wrt else None for i in range(len(inputs))]
            except mx.base.MXNetError as exc:
                if "not in a computational graph" not in str(exc):
                    raise
            backward = [i for i in changed() if i not in forward]
        return {"forward": forward, "backward": backward, "versions": None, "output": out,
                "input_grads": grads, "state_grads": {}}

    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["hybridize()"]

    def compile(self, fn, layer, compiler):
        if layer is None:
            raise NotApplicable("an autograd.Function runs imperatively on NDArrays: MXNet 1.9.1 cannot place it "
                              "in a hybridized graph, so a function contract has nothing to hybridize", code="imperative_function")
        if not isinstance(layer, gluon.HybridBlock):
            raise NotApplicable(f"{type(layer).__name__} is a gluon Block, not a HybridBlock: only a HybridBlock's "
                              f"hybrid_forward compiles to a graph (hybridize() on a Block hybridizes only its "
                              f"HybridBlock children)", code="not_hybrid")
        return _Hybridized(layer)

    def compiled_call(self, compiled, inputs, training=False):
        return self.call(compiled.layer, inputs, training=training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return self.vjp(compiled.layer, compiled.layer, inputs, wrt, cotangent)

    def compile_stats(self, compiled):
        return {"traces": compiled.traces, "graphs": compiled.traces, "breaks": [], "guard_failures": []}

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

    def to_dtype(self, layer, dtype):
        if dtype in _NO_DTYPE:
            raise NotApplicable(_NO_DTYPE[dtype], code="no_dtype")
        if not isinstance(layer, gluon.Block):
            return layer
        dense = []
        layer.apply(lambda b: dense.append(b) if isinstance(b, gluon.nn.Dense) else None)
        if dtype == "float16" and dense and all(c.device_type == "cpu" for d in dense
                                                for p in d.collect_params().values() for c in _contexts(p)):
            raise NotApplicable("MXNet 1.9.1's FullyConnected (gluon.nn.Dense) runs in float16 only through "
                              "cuDNN, not on the CPU", code="no_kernel")
        # a hybridized block's cached op holds ctypes pointers that cannot be copied; it is
        # rebuilt on the next call
        layer.apply(lambda b: b._clear_cached_op() if isinstance(b, gluon.HybridBlock) else None)
        try:
            layer64 = copy.deepcopy(layer)
        except (TypeError, ValueError):  # something else the layer holds cannot be copied
            return None
        for p in layer64.collect_params().values():
            if np.issubdtype(np.dtype(p.dtype), np.floating):  # a bool mask stays bool
                p.cast(dtype)
        return layer64

    # -- export: whole-layer formats (the export check) ---------------------------------------
    # -- mixed precision (the mixed_precision check) -------------------------------------------
    # Gluon 1.x keeps float32 master weights only under AMP (mxnet.contrib.amp): amp.init() patches every
    # operator of mx.nd/mx.sym for good to cast per operator, so each target dtype runs in a process of its own.
    _AMP = {"amp.init(target_dtype='float16')": "float16", "amp.init(target_dtype='bfloat16')": "bfloat16"}

    def mixed_precision_policies(self, obj, function=False):
        return [{"policy": name, "variables": "float32", "compute": compute, "output": None, "isolated": True}
                for name, compute in self._AMP.items()] + [
            {"policy": "Block.cast('float16')", "not_applicable": "it casts the parameters themselves (no float32 "
             "master weights are kept): whole-model 16-bit, not mixed precision"},
            {"policy": "a dtype policy (Keras-style)", "not_applicable": "Gluon 1.x has none outside AMP"}]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        from mxnet.contrib import amp
        target = self._AMP[policy]
        amp.init(target_dtype=target)  # before the user's module is imported, as AMP's tutorial has it
        if target == "bfloat16":
            _probe_bfloat16()
        impl, layer = self.built_with(impl, constructor, inputs, assign)
        fn = layer if layer is not None else self.as_callable(impl)
        args = [_array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        params = self.trainable(layer) if layer is not None else {}
        if layer is not None:
            layer.collect_params().zero_grad()
        with autograd.record(train_mode=False):
            out = fn(*args)
            if not isinstance(out, mx.nd.NDArray):
                raise TypeError(f"the output is a {type(out).__name__}, not an MXNet array")
            wide = out.astype("float32") if _amp_dtype(out) in ("float16", "bfloat16") else out
            loss = (wide * _array(np.asarray(cotangent).reshape(out.shape), dtype=wide.dtype)).sum() \
                if cotangent is not None else None
        if loss is not None:
            loss.backward()
        mx.nd.waitall()
        grads = {n: None if p.grad_req == "null" else _amp_dtype(p.grad(p.list_ctx()[0])) for n, p in params.items()}
        variables = {n: _amp_dtype(p.data(p.list_ctx()[0])) for n, p in
                     {**self.non_trainable(layer), **params}.items()} if layer is not None else {}
        return {"mechanism": policy, "output_dtype": _amp_dtype(out), "output": wide.asnumpy(),
                "variables": variables, "gradients": grads, "compute_dtype": None,
                "input_dtypes": [_amp_dtype(a) for a in args],
                "input_gradients": [_amp_dtype(args[i].grad) if i in wrt else None for i in range(len(args))],
                "notes": []}

    def export_formats(self, obj):
        if isinstance(obj, gluon.HybridBlock):
            return ["gluon.export"]
        if isinstance(obj, gluon.Block):
            raise NotApplicable("a gluon Block (not a HybridBlock) has no symbolic graph: Gluon 1.9.1 saves a whole "
                              "layer only through HybridBlock.hybridize() + export", code="not_hybrid")
        raise NotApplicable("an autograd.Function runs imperatively only: Gluon 1.9.1 has no format that saves it", code="imperative_function")

    def export_save(self, obj, fmt, examples, path):
        if fmt != "gluon.export":
            raise NotApplicable(f"{fmt} is not a Gluon format", code="no_format")
        os.makedirs(path, exist_ok=True)
        obj.hybridize()
        with autograd.predict_mode():
            self.call(obj, examples[0])  # export needs one hybridized call to have built the graph
        obj.export(os.path.join(path, "layer"), epoch=0)
        return {"gradients": "kept"}

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        if fmt != "gluon.export":
            raise NotApplicable(f"{fmt} is not a Gluon format", code="no_format")
        symbol, params = os.path.join(path, "layer-symbol.json"), os.path.join(path, "layer-0000.params")
        # the graph's inputs are its arguments that the parameter file does not hold
        held = {k.split(":", 1)[-1] for k in mx.nd.load(params)}
        names = [n for n in mx.sym.load(symbol).list_inputs() if n not in held]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            block = gluon.SymbolBlock.imports(symbol, names, params, ctx=mx.cpu(0))
        return block, block

    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl

        def state(layer):
            return {n: p.data(p.list_ctx()[0]).asnumpy() for n, p in self._named(layer).items()}

        mx.random.seed(0)
        plain = self.construct(impl, constructor)
        if not isinstance(plain, gluon.Block):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not a Gluon block", code="not_a_module")
        if not self._named(plain):
            raise NotApplicable("the block holds no parameters: nothing for deferred initialisation to shape", code="no_state")
        want = state(self.build(plain, inputs))
        mx.random.seed(1)
        random = {n for n, v in state(self.build(self.construct(impl, constructor), inputs)).items()
                  if n in want and not np.array_equal(v, want[n], equal_nan=True)}
        # hybridize() is left to ``compiled``: a block that cannot be hybridized is that check's to name. The first
        # call is on another case's inputs where the contract has one: the shapes a deferred initialisation infers
        # must not depend on which batch comes first (a plain build's first call is on the first case's)
        first = inputs if other is None else other
        on = ", ".join(str(list(np.shape(a))) for a in first)
        built_on = ", ".join(str(list(np.shape(a))) for a in inputs)
        part = ("initialize() before the shapes are known, then a first call" +
                ("" if other is None else f" on another case's inputs ({on})"))
        mx.random.seed(0)
        layer = self.construct(impl, constructor)
        problems, raised = [], None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                layer.initialize()
            self.call(layer, first)
        except Exception as exc:
            raised = f"raised {_said(exc)}"
        try:  # a first call that raised may have finished the initialisation (its shapes say why it raised)
            got = state(layer)
        except Exception:
            return [{"part": part, "problems": [raised or "left parameters uninitialised"], "hint": None}]
        if raised:
            problems.append(f"the first call {raised}")
        shaped = False
        for n in sorted(set(want) | set(got)):
            if n not in got or n not in want:
                problems.append(f"{n!r} is {'missing' if n not in got else 'extra'} after deferred initialisation")
            elif got[n].shape != want[n].shape or got[n].dtype != want[n].dtype:
                shaped = True
                problems.append(f"{n!r} is {list(got[n].shape)} {got[n].dtype} after a first call on {on}, a plain "
                                f"build's (first call on {built_on}) {list(want[n].shape)} {want[n].dtype}")
            elif n in random:
                if not np.isfinite(got[n]).all():
                    problems.append(f"{n!r} (randomly initialised) is not finite")
            elif not np.array_equal(got[n], want[n], equal_nan=True):
                problems.append(f"{n!r} differs from a plain build's")
        if problems:
            problems[-1] += (": give a parameter's unknown dimensions as 0 (allow_deferred_init) and let the first "
                             "call infer them (infer_shape in hybrid_forward), with its initializer in params.get"
                             + ("; infer each from the axis it stands for (the features: X.shape[-1]), not from the "
                                "batch's other axes (nn.Dense(flatten=True)'s prod(X.shape[1:]))"
                                if shaped and other is not None else ""))
        return [{"part": part, "problems": problems, "hint": None}]

    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def _symbolic(self, layer, n):
        """The HybridBlock's graph on ``n`` input variables (x0, x1, ...), or NotApplicable."""
        if layer is None:
            raise NotApplicable("an MXNet function runs imperatively on NDArrays: only a HybridBlock's "
                                "hybrid_forward builds a symbolic graph to infer shapes from", code="imperative_function")
        if not isinstance(layer, gluon.HybridBlock):
            raise NotApplicable(f"{type(layer).__name__} is a gluon Block, not a HybridBlock: only a HybridBlock's "
                                f"hybrid_forward builds a symbolic graph to infer shapes from", code="not_hybrid")
        names = [f"x{i}" for i in range(n)]
        with autograd.predict_mode():
            out = layer(*[mx.sym.var(name) for name in names])
        if isinstance(out, (list, tuple)):
            raise TypeError(f"the symbolic call gives {len(out)} outputs, the layer one")
        return out, names

    def abstract_outputs(self, fn, layer, inputs):
        arrays = [np.asarray(a) for a in inputs]
        way = "the HybridBlock's symbolic graph (infer_shape, infer_type)"
        try:
            out, names = self._symbolic(layer, len(arrays))
            given = {k: a.shape for k, a in zip(names, arrays)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Cannot decide shape for the following arguments": said below
                _, shapes, _ = out.infer_shape(**given)
            _, types, _ = out.infer_type(**{k: a.dtype for k, a in zip(names, arrays)})
        except NotApplicable as exc:
            return [{"way": way, "na": str(exc)}]
        except Exception as exc:
            return [{"way": way, "error": self._abstract_error(exc)}]
        if not shapes or shapes[0] is None:
            first = _first_unknown(out, given, layer.prefix)
            return [{"way": way, "error": "infer_shape gives no output shape from the inputs' shapes ("
                                          + ", ".join(str(list(a.shape)) for a in arrays) + ")"
                                          + (f": the first unknown one is {first}'s, an operator whose output "
                                             f"shape depends on the values (contrib.boolean_mask, a nonzero, a "
                                             f"unique), known only by running it" if first else "")}]
        return [{"way": way, "shape": [int(d) for d in shapes[0]], "dtype": np.dtype(types[0]).name}]

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        out, names = self._symbolic(layer, len(batches[0]))
        params = {p.name: p.data(p.list_ctx()[0]) for p in layer.collect_params().values()}
        args = set(out.list_arguments())
        aux = out.list_auxiliary_states()
        outs = []
        for xs in batches:  # one graph, bound at each batch size
            given = {**{k: v for k, v in params.items() if k in args},
                     **{k: _array(a, mx.cpu(0)) for k, a in zip(names, xs)}}
            bound = out.bind(mx.cpu(0), args=given, aux_states={k: params[k] for k in aux}, grad_req="null")
            outs.append(bound.forward(is_train=False)[0].asnumpy())
        return {"way": f"the HybridBlock's symbolic graph bound at each batch size (axis {axis})", "outputs": outs}




class _Hybridized:
    """The layer after ``hybridize()``; ``traces`` counts hybrid_forward runs on Symbols (graph
    construction), wrapped on the instance so that the class is left alone."""

    def __init__(self, layer):
        self.layer, self.traces = layer, 0
        original = layer.hybrid_forward

        def counting(F, *args, **kwargs):
            if F is mx.sym or any(isinstance(a, mx.sym.Symbol) for a in args):
                self.traces += 1
            return original(F, *args, **kwargs)
        layer.hybrid_forward = counting
        layer.hybridize()


def _probe_bfloat16(wait_s: float = 60.0) -> None:
    """Raise NotApplicable where this CPU cannot run AMP's bfloat16 operators (FullyConnected, Convolution,
    forward and backward): oneDNN runs bfloat16 only with bfloat16 instructions (AVX512-BF16, AMX), and
    where it picks AMX tiles that the kernel has not granted to the process, the process dies of SIGILL.
    The probe runs in a child process, so that a CPU's failure, crash included, is never the layer's.
    Forked before anything has computed here (as the zygote forks this process), so no thread pool is
    half-copied; by hand, not multiprocessing: its child flushes the stdio buffers it inherited, and this
    process's stdio may carry the executor's channel."""
    import select
    import signal
    import time
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the operators, say what failed, leave without the parent's atexit
        code = 0
        try:
            os.close(read)
            dense, conv = gluon.nn.Dense(64, in_units=64), gluon.nn.Conv2D(8, 3, in_channels=4)
            dense.initialize()
            conv.initialize()
            x, img = mx.nd.ones((16, 64)), mx.nd.ones((2, 4, 8, 8))
            x.attach_grad()
            img.attach_grad()
            with autograd.record():
                loss = dense(x).astype("float32").sum() + conv(img).astype("float32").sum()
            loss.backward()
            x.grad.asnumpy(), img.grad.asnumpy()
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the parent reports it
            os.write(write, (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200].encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    said, left, end = b"", False, time.monotonic() + wait_s
    try:
        while not left and time.monotonic() < end:
            ready, _, _ = select.select([read], [], [], max(0.0, end - time.monotonic()))
            if ready:
                chunk = os.read(read, 4096)
                said, left = said + chunk, not chunk  # end of file: the child has left (or is leaving)
    finally:
        os.close(read)
    if not left:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not left:
        raise NotApplicable(f"MXNet's bfloat16 operators did not finish on this CPU in {wait_s:.0f} s", code="no_kernel")
    if os.WIFSIGNALED(status):
        raise NotApplicable(f"MXNet's bfloat16 operators kill the process on this CPU "
                          f"({signal.Signals(os.WTERMSIG(status)).name}): its oneDNN cannot run them here", code="no_kernel")
    if os.WEXITSTATUS(status) != 0:
        raise NotApplicable(f"this CPU has no bfloat16 kernels for MXNet's oneDNN ({said.decode(errors='replace')})", code="no_kernel")
