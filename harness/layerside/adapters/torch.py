"""PyTorch adapter.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import copy
import inspect
import types

import numpy as np
import torch

from .base import Adapter, NotApplicable, import_spec
from .walk import walk_attributes


# Attributes every nn.Module has for its own bookkeeping (registered state lives in them).
_MODULE_INTERNALS = frozenset(vars(torch.nn.Module()))


def _settle_compiler():
    """What torch.compile patches on its first use in a process (TorchPatcher.patch, cached), done before
    the executor's fingerprint; the default for distributions' argument validation, which it also turns
    off, is put back, so that eager calls keep eager semantics. A torch without TorchPatcher (a private
    name) costs only a fresh process after a compiled check, so its absence is not an error."""
    try:
        from torch._dynamo.eval_frame import TorchPatcher
    except ImportError:
        return
    validate = torch.distributions.Distribution._validate_args
    TorchPatcher.patch()
    torch.distributions.Distribution.set_default_validate_args(validate)


class _InPlaceOps:
    """The in-place operations (``Tensor.mul_``...) the forward applies to each input's memory: {input index:
    [operation names]}, seen below autograd by a dispatch mode (empty where torch has none)."""

    def __init__(self, args):
        self.ops: dict = {}
        self._storages = {}
        for i, t in enumerate(args):
            try:
                self._storages.setdefault(t.untyped_storage().data_ptr(), i)
            except (AttributeError, RuntimeError):
                pass
        self._mode = None
        try:
            from torch.utils._python_dispatch import TorchDispatchMode
        except ImportError:
            return
        watch = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                watch.saw(func, args)
                return func(*args, **(kwargs or {}))
        self._mode = Mode()

    def saw(self, func, args):
        name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
        first = args[0] if args else None
        if not (name.endswith("_") and not name.startswith("_") and isinstance(first, torch.Tensor)):
            return
        try:
            i = self._storages.get(first.untyped_storage().data_ptr())
        except (AttributeError, RuntimeError):
            return
        if i is not None and f"Tensor.{name}" not in self.ops.setdefault(i, []):
            self.ops[i].append(f"Tensor.{name}")

    def __enter__(self):
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
        return False


class FrameworkAdapter(Adapter):
    name = "torch"
    parameter_type = "nn.Parameter"
    module = "torch"
    # torch._dynamo wraps torch.manual_seed when first imported; the first torch.compile wraps torch.jit.trace,
    # fx's Tracer.trace and the fused optimizers (TorchPatcher.patch, run once per process)
    settled_by = ("torch._dynamo", "layer_conformance.layerside.adapters.torch:_settle_compiler")
    # what torch.export.load and the loaded program's first call import (sympy, networkx, AOTAutograd: 0.4 s
    # of a forked executor's first load without them; the symbolic batch dimension's sympy and size
    # modules another 0.17 s)
    preloaded = ("torch._dynamo", "torch._export.serde.serialize", "torch._functorch.aot_autograd",
                 "torch._functorch.partitioners", "torch._export.passes.add_runtime_assertions_for_constraints_pass",
                 "torch.export._trace", "torch.export._unlift", "sympy.combinatorics", "sympy.tensor.tensor",
                 "torch._inductor.sizevars", "torch.fx.experimental.validator", "torch.utils.serialization")
    preloaded_when_idle = ("torch._dynamo.backends.debugging", "torch._functorch.compilers",
                           "torch._inductor.decomposition", "torch._inductor.lowering",
                           "torch._inductor.fx_passes.joint_graph", "torch._dynamo.repro.after_aot",
                           "torch._inductor.scheduler", "torch._inductor.codegen.wrapper")

    def owns(self, obj) -> bool:
        if inspect.isclass(obj):
            return issubclass(obj, (torch.nn.Module, torch.autograd.Function))
        if isinstance(obj, (torch.nn.Module, torch.Tensor)):
            return True
        return (getattr(obj, "__module__", "") or "").split(".")[0] == "torch"


    def devices(self):
        devs = ["meta"]
        if torch.cuda.is_available():
            devs.append("cuda")
        return devs

    def is_virtual(self, device):
        return device == "meta"

    # -- tensors -----------------------------------------------------------------------
    def tensor(self, array, device=None):
        a = np.asarray(array)
        bf16 = a.dtype.name == "bfloat16"
        if bf16:  # torch.from_numpy knows no ml_dtypes.bfloat16: its bits, as int16, viewed back
            a = a.view(np.int16)
        t = torch.from_numpy(np.ascontiguousarray(a).reshape(a.shape))  # ascontiguousarray makes 0-d 1-d
        if bf16:
            t = t.view(torch.bfloat16)
        return t.to(device) if device else t

    def numpy(self, t):
        """The tensor's values in its own dtype: a bfloat16 tensor (which .numpy() refuses) comes back as
        ml_dtypes.bfloat16, bit for bit, so that the judge sees the dtype the layer returned."""
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
        t = t.detach().cpu().resolve_conj()
        if t.dtype == torch.bfloat16:
            import ml_dtypes
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()

    def is_tensor(self, obj):
        return isinstance(obj, torch.Tensor)

    def dtype_name(self, t):
        return str(t.dtype).replace("torch.", "")

    def device_of(self, t):
        # "cuda:0" is the "cuda" the devices check moved to; other indices stay distinct
        return t.device.type if t.device.index in (None, 0) else str(t.device)

    # -- building and calling ----------------------------------------------------------------
    def as_callable(self, obj):
        # A Function subclass is only an autograd node when called through apply.
        if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
            return obj.apply
        return obj

    def call(self, layer, inputs, device=None, training=False):
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a, device) for a in inputs]
        if isinstance(layer, torch.nn.Module):
            layer.train(training)
        return layer(*args)

    # -- state ---------------------------------------------------------------------------
    def trainable(self, layer):
        return dict(layer.named_parameters()) if isinstance(layer, torch.nn.Module) else {}

    def non_trainable(self, layer):
        return dict(layer.named_buffers()) if isinstance(layer, torch.nn.Module) else {}

    def optimizer_view(self, layer):
        return list(layer.parameters())

    def untracked(self, layer):
        registered = {id(t) for t in list(layer.parameters()) + list(layer.buffers())}

        def is_state(v):
            return isinstance(v, torch.Tensor) and id(v) not in registered

        def children(v):
            return v._modules.items() if isinstance(v, torch.nn.Module) else None

        def describe(v):
            return f"{'nn.Parameter' if isinstance(v, torch.nn.Parameter) else 'tensor'} {list(v.shape)}"

        return walk_attributes(layer, is_state, children, describe=describe,
                               internal=_MODULE_INTERNALS)

    def assign(self, layer, name, value):
        target = dict(layer.named_parameters()).get(name)
        if target is None:
            target = dict(layer.named_buffers())[name]
        with torch.no_grad():
            target.copy_(self.tensor(value).to(target.dtype))

    def serialized_state(self, layer):
        return {k: self.numpy(v) for k, v in layer.state_dict().items()}

    def round_trip(self, layer, fresh):
        import io
        buf = io.BytesIO()
        torch.save(layer.state_dict(), buf)  # through bytes, as a checkpoint would
        buf.seek(0)
        fresh.load_state_dict(torch.load(buf, weights_only=True), strict=True)
        return fresh

    def export_state(self, layer):
        import io
        buf = io.BytesIO()
        torch.save(layer.state_dict(), buf)
        return buf.getvalue()

    def load_state(self, layer, saved, strict=True):
        import io
        layer.load_state_dict(torch.load(io.BytesIO(saved), weights_only=True), strict=strict)
        return layer

    def alter_saved(self, layer, saved, drop=None, add=None):
        import io
        state = torch.load(io.BytesIO(saved), weights_only=True)
        if drop is not None:
            state.pop(drop)
        if add is not None:
            state[add] = torch.zeros(1)
        buf = io.BytesIO()
        torch.save(state, buf)
        return buf.getvalue()

    # -- composition and devices ---------------------------------------------------------------
    def sequential(self, layer, width):
        gen = torch.Generator().manual_seed(0)
        with torch.random.fork_rng(devices=[]):  # the harness's own layers leave the global RNG alone
            first, last = torch.nn.Linear(width, width), torch.nn.Linear(width, 2)
        with torch.no_grad():
            for p in list(first.parameters()) + list(last.parameters()):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        return torch.nn.Sequential(first, layer, last)

    def nest(self, layer, dense=None):
        if dense is None:
            return torch.nn.Sequential(layer)
        gen = torch.Generator().manual_seed(0)
        with torch.random.fork_rng(devices=[]):
            first = torch.nn.Linear(*dense)
        with torch.no_grad():
            for p in first.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        return torch.nn.Sequential(first, layer)

    def manual_seed(self, seed):
        torch.manual_seed(seed)

    def move(self, layer, device, rebuild=None):
        return layer.to(device)

    # -- gradients ---------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs, wrt, cotangent):
        leaves = [(a if isinstance(a, torch.Tensor) else self.tensor(a)) for a in inputs]
        leaves = [t.detach().clone().requires_grad_(True) if i in wrt else t for i, t in enumerate(leaves)]
        # the layer gets copies, not the leaves: a layer that writes into its input (declared aliasing: in_place)
        # may, where a leaf that requires grad refuses it; the gradient reaches the leaf all the same
        args = [t.clone() if i in wrt else t for i, t in enumerate(leaves)]
        return self._backward_through(fn, layer, args, wrt, cotangent,
                                      lambda out: self.tensor(cotangent).to(dtype=out.dtype, device=out.device),
                                      leaves=leaves)

    def _backward_through(self, fn, layer, args, wrt, cotangent, seed, leaves=None):
        """``fn(*args)`` in evaluation mode, then backward from ``seed(out)`` (unless there is no cotangent or
        nothing to differentiate): the output, the gradients of the inputs in ``wrt`` (those of ``leaves``, where
        the args are copies of them) and of every parameter and buffer, detached."""
        leaves = args if leaves is None else leaves
        state = {}
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
            layer.zero_grad(set_to_none=True)
            state = {**self.non_trainable(layer), **self.trainable(layer)}
        out = fn(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
        input_grads = [None] * len(args)
        if out.requires_grad and cotangent is not None:
            torch.autograd.backward(out, seed(out))
            input_grads = [leaves[i].grad if i in wrt else None for i in range(len(args))]
        conv = lambda g: None if g is None else g.detach()
        return out.detach(), [conv(g) for g in input_grads], {k: conv(v.grad) for k, v in state.items()}

    def custom_rule_recorded(self, fn, inputs, wrt):
        from torch.autograd.function import BackwardCFunction  # the node a Function's apply records
        args = [(a if isinstance(a, torch.Tensor) else self.tensor(a)).detach().clone().requires_grad_(i in wrt)
                for i, a in enumerate(inputs)]
        out = fn(*args)
        nodes, seen = [getattr(out, "grad_fn", None)], set()
        while nodes:
            node = nodes.pop()
            if node is None or node in seen:
                continue
            if isinstance(node, BackwardCFunction):
                return True
            seen.add(node)
            nodes.extend(n for n, _ in node.next_functions)
        return False

    def jvp(self, fn, layer, inputs, tangents):
        # forward_ad (dual tensors) also runs old-style Functions that define a jvp staticmethod,
        # which torch.func.jvp refuses without setup_context
        import warnings
        import torch.autograd.forward_ad as fwAD
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
        # torch's first make_dual loads its jvp decompositions through the deprecated jit.script
        with warnings.catch_warnings(), fwAD.dual_level():
            warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated", category=DeprecationWarning)
            args = []
            for a, t in zip(inputs, tangents):
                x = a if isinstance(a, torch.Tensor) else self.tensor(a)
                if t is not None:
                    x = fwAD.make_dual(x, self.tensor(t).to(x.dtype))
                args.append(x)
            out = fn(*args)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
            primal, tangent = fwAD.unpack_dual(out)
            primal = primal.detach().clone()
            tangent = torch.zeros_like(primal) if tangent is None else tangent.detach().clone()
        return primal, tangent

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        args = []
        for i, a in enumerate(inputs):
            t = a if isinstance(a, torch.Tensor) else self.tensor(a)
            args.append(t.detach().clone().requires_grad_(True) if i in wrt else t)
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
        out = fn(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
        if not out.requires_grad:
            return [None] * len(inputs)
        ct = self.tensor(cotangent).to(dtype=out.dtype, device=out.device)
        sources = [args[i] for i in wrt]
        # create_graph records the backward rule itself, so it can be differentiated again
        grads = torch.autograd.grad((out * ct).sum(), sources, create_graph=True, allow_unused=True)
        dot = [(g * self.tensor(directions[i]).to(g.dtype)).sum()
               for i, g in zip(wrt, grads) if g is not None and g.requires_grad]
        if not dot:  # a rule computed outside autograd (detached, numpy) gives constant gradients
            return [None] * len(inputs)
        second = torch.autograd.grad(torch.stack(dot).sum(), sources, allow_unused=True)
        by_index = dict(zip(wrt, second))
        return [None if by_index.get(i) is None else by_index[i].detach() for i in range(len(inputs))]

    # -- the vectorising transform (the ``batching`` check) ----------------------------------------
    def _func_refused(self, exc, required):
        """torch.func's refusal of a custom autograd.Function it cannot transform, as n/a (not the layer's
        failure unless the contract asks for torch.func support)."""
        text = str(exc)
        if not required and isinstance(exc, RuntimeError) and "autograd.Function" in text and (
                "setup_context" in text or "vmap" in text):
            raise NotApplicable("a custom torch.autograd.Function here has no setup_context staticmethod and "
                                "vmap rule (vmap staticmethod or generate_vmap_rule = True), so torch.func cannot "
                                f"run it (torch: {text.splitlines()[0]}); the contract's batching: {{vmap: "
                                f"required}} makes this a failure", code="custom_function_no_vmap") from None
        raise exc

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        from torch.func import functional_call, vmap
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
            state = {**dict(layer.named_parameters()), **dict(layer.named_buffers())}
            fn = lambda *xs: functional_call(layer, state, xs)  # noqa: E731  (the transform's own way for a Module)
        try:
            with torch.no_grad():
                return vmap(fn, in_dims=tuple(in_axes), out_dims=axis)(*args)
        except Exception as exc:
            self._func_refused(exc, required)

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        from torch.func import vjp, vmap
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        ct = self.tensor(cotangent)

        def of_wrt(*xs):  # fn as a function of the differentiated inputs
            full = list(args)
            for i, x in zip(wrt, xs):
                full[i] = x
            return full

        try:
            vectorised = vmap(fn, in_dims=tuple(in_axes), out_dims=axis)
            _, pull = vjp(lambda *xs: vectorised(*of_wrt(*xs)), *[args[i] for i in wrt])
            grad_of_vmap = dict(zip(wrt, pull(ct.to(args[wrt[0]].dtype))))

            def one(*xs_ct):  # one example's gradient: every input (batched or not) and its cotangent
                *xs, c = xs_ct
                _, pull = vjp(lambda *w: fn(*[dict(zip(wrt, w)).get(i, x) for i, x in enumerate(xs)]),
                              *[xs[i] for i in wrt])
                return pull(c)
            per = vmap(one, in_dims=(*in_axes, axis), out_dims=axis)(*args, ct.to(args[wrt[0]].dtype))
            vmap_of_grad = dict(zip(wrt, per))
        except Exception as exc:
            self._func_refused(exc, required)
        conv = lambda g: None if g is None else g.detach()  # noqa: E731
        return {"grad_of_vmap": [conv(grad_of_vmap.get(i)) for i in range(len(inputs))],
                "vmap_of_grad": [conv(vmap_of_grad.get(i)) for i in range(len(inputs))]}

    # -- the compiler --------------------------------------------------------------------------
    def layouts(self, inputs):
        ranks = [np.ndim(a) for a in inputs]
        out = ["strided"]
        if any(r >= 2 for r in ranks):
            out.insert(0, "transposed")
        if any(r == 4 for r in ranks):
            out.append("channels_last")
        return out

    def _laid_out(self, a, layout):
        """``a`` (numpy) as a tensor with the same values laid out as ``layout``: "transposed" (the last two axes
        stored swapped: x.transpose(-1, -2).contiguous().transpose(-1, -2)), "strided" (every other element of a
        tensor twice as long in the last axis), "channels_last" (4-D), else contiguous. A fresh leaf."""
        t = self.tensor(a)
        if layout == "transposed" and t.dim() >= 2:
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        elif layout == "strided" and t.dim() >= 1:
            wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
            wide[..., ::2] = t
            t = wide[..., ::2]
        elif layout == "channels_last" and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        else:
            t = t.clone()
        return t.detach()

    def layout_vjp(self, fn, layer, inputs, wrt, cotangent, layout):
        args = [self._laid_out(a, layout).requires_grad_(i in wrt) for i, a in enumerate(inputs)]
        return self._backward_through(fn, layer, args, wrt, cotangent,
                                      lambda out: self._laid_out(np.asarray(cotangent), layout).to(dtype=out.dtype))

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        leaves = [self.tensor(a).clone().requires_grad_(i in wrt) for i, a in enumerate(inputs)]
        args = [t.clone() if t.requires_grad else t for t in leaves]  # not leaves: an in-place write is allowed
        before = [t.detach().clone() for t in args]
        versions = [t._version for t in args]
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
            layer.zero_grad(set_to_none=True)
        watch = _InPlaceOps(args)
        with watch:
            out = fn(*args)
        changed = lambda: [i for i, (t, b) in enumerate(zip(args, before))
                           if not torch.equal(torch.nan_to_num(t.detach()), torch.nan_to_num(b))]
        forward = changed()
        moved = [i for i, (t, v) in enumerate(zip(args, versions)) if t._version != v]
        backward = []
        grads = [None] * len(inputs)
        if isinstance(out, torch.Tensor) and out.requires_grad and cotangent is not None:
            ct = self.tensor(np.asarray(cotangent)).to(dtype=out.dtype)
            try:
                torch.autograd.backward(out, ct)
            except RuntimeError:
                if not (forward or moved):
                    raise
                # autograd refuses a backward through what the forward overwrote: the write is the finding
            backward = [i for i in changed() if i not in forward]
            grads = [leaves[i].grad if i in wrt else None for i in range(len(inputs))]
        state = {**self.non_trainable(layer), **self.trainable(layer)} if isinstance(layer, torch.nn.Module) else {}
        conv = lambda g: None if g is None else g.detach()
        return {"forward": forward, "backward": backward, "versions": moved, "ops": watch.ops,
                "output": out.detach() if isinstance(out, torch.Tensor) else out,
                "input_grads": [conv(g) for g in grads], "state_grads": {k: conv(v.grad) for k, v in state.items()}}

    def compilers(self, backend=None):
        return [f"torch.compile(backend={backend or 'aot_eager'!r})"]

    def compile(self, fn, layer, compiler):
        import re
        return _Compiled(fn, re.search(r"backend='([^']+)'", compiler).group(1))

    def compiled_call(self, compiled, inputs, training=False):
        return compiled.run(lambda: self.call(compiled.fn, inputs, training=training))

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return compiled.run(lambda: self.vjp(compiled.fn, layer, inputs, wrt, cotangent))

    def compile_stats(self, compiled):
        return {"traces": compiled.traces, "graphs": compiled.graphs, "breaks": compiled.breaks,
                "guard_failures": compiled.guard_failures}

    # (getter, setter) for each piece of process-global state a layer could change
    _GLOBALS = {
        "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "threads": (torch.get_num_threads, torch.set_num_threads),
        "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
        "RNG state": (torch.get_rng_state, torch.set_rng_state),
    }

    def save_globals(self):
        return {name: get() for name, (get, _) in self._GLOBALS.items()}

    def restore_globals(self, saved):
        changed = []
        for name, (get, put) in self._GLOBALS.items():
            now = get()
            if not (torch.equal(now, saved[name]) if isinstance(now, torch.Tensor) else now == saved[name]):
                changed.append(f"torch {name}")
            put(saved[name])
        return changed

    def to_dtype(self, layer, dtype):
        if isinstance(layer, torch.nn.Module):
            return copy.deepcopy(layer).to(getattr(torch, dtype))  # floating parameters and buffers only
        return layer

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _AUTOCAST = "torch.autocast('cpu', dtype=torch.bfloat16)"

    def mixed_precision_policies(self, obj, function=False):
        # autocast casts per operator (its lists decide which run in bf16): the output dtype is not fixed
        return [{"policy": self._AUTOCAST, "variables": "float32", "compute": "bfloat16", "output": None}]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl, layer = self.built_with(impl, constructor, inputs, assign)
        if layer is not None:
            layer.train(False)
        fn = layer if layer is not None else self.as_callable(impl)
        args = [self.tensor(a) for a in inputs]
        args = [a.requires_grad_(True) if i in wrt else a for i, a in enumerate(args)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
        if cotangent is not None and out.requires_grad:
            # the backward outside autocast, as torch's AMP recipe has it
            (out * self.tensor(cotangent).to(out.dtype)).sum().backward()
        notes = []
        if inspect.isclass(impl) and issubclass(impl, torch.autograd.Function):
            decorated = hasattr(impl.forward, "__wrapped__")  # torch.amp.custom_fwd wraps it (functools.wraps)
            notes.append("the Function's forward is decorated with torch.amp.custom_fwd" if decorated else
                         "the Function's forward is not decorated with torch.amp.custom_fwd: autocast stays on "
                         "inside it, and its backward runs without it")
        params = dict(layer.named_parameters()) if layer is not None else {}
        buffers = dict(layer.named_buffers()) if layer is not None else {}
        return {"mechanism": self._AUTOCAST, "output_dtype": self.dtype_name(out), "output": _plain(out),
                "variables": {n: self.dtype_name(v) for n, v in {**buffers, **params}.items()},
                "gradients": {n: None if p.grad is None else self.dtype_name(p.grad) for n, p in params.items()},
                "input_dtypes": [self.dtype_name(a) for a in args],
                "input_gradients": [None if a.grad is None else self.dtype_name(a.grad) for a in args],
                "compute_dtype": None, "notes": notes}

    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["torch.export", "torch.save", "state_dict"] if isinstance(obj, torch.nn.Module) else ["torch.export"]

    def export_save(self, obj, fmt, examples, path):
        import os
        os.makedirs(path, exist_ok=True)
        module = obj if isinstance(obj, torch.nn.Module) else _Calls(obj)
        if fmt == "torch.export":
            import json
            module.train(False)
            signatures, runs = [], []  # per saved program: its inputs' (rank, dtype, shape or None: dynamic)
            refused = (AssertionError, RuntimeError, ValueError)  # a program's input guards refuse the shapes
            for xs in examples:
                args = tuple(self.tensor(a) for a in xs)
                if any(_accepts(sig, args) and _runs(run, args, refused) for (sig, _), run in zip(signatures, runs)):
                    continue  # a program already exported takes these inputs: no second export
                # one program per rank and dtype with every size dynamic; where its guards refuse a case's
                # sizes (torch.export specializes boundary sizes, e.g. a slice up to a buffer's length), one
                # program for exactly those shapes, as a deployment serving them would export
                dynamic = not any(_accepts(sig, args, ranks_only=True) for sig, _ in signatures)
                program = None
                if dynamic:
                    dims = tuple({i: torch.export.Dim.AUTO for i in range(a.dim())} for a in args)
                    dims = (dims,) if isinstance(module, _Calls) else dims  # _Calls.forward(*xs) takes one tuple
                    program = torch.export.export(module, args, dynamic_shapes=dims)
                    if not _runs(program.module(), args, refused):
                        program = None
                exact = program is None
                if exact:
                    program = torch.export.export(module, args)
                sig = [[a.dim(), str(a.dtype), list(a.shape) if exact else None] for a in args]
                name = f"layer{len(signatures)}.pt2"
                torch.export.save(program, os.path.join(path, name))
                signatures.append((sig, name))
                runs.append(program.module())
            with open(os.path.join(path, "programs.json"), "w") as f:
                json.dump(signatures, f)
            custom = _custom_functions(module, args)
            return {"gradients": "kept" if not custom else
                    f"torch.export records the forward of the custom autograd.Function(s) {', '.join(custom)} "
                    f"and keeps no backward: the loaded program's gradient is autodiff of that forward"}
        if fmt == "torch.save":
            torch.save(module, os.path.join(path, "layer.pt"))  # pickles the object; loading imports its class
            return {"gradients": "kept"}
        if fmt == "state_dict":
            torch.save(module.state_dict(), os.path.join(path, "state.pt"))
            return {"gradients": "kept"}
        raise NotApplicable(f"{fmt} is not a torch format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        import os
        if fmt == "torch.export":
            import json
            programs = _Programs()
            with open(os.path.join(path, "programs.json")) as f:
                signatures = json.load(f)
            for i, (sig, name) in enumerate(signatures):
                module = torch.export.load(os.path.join(path, name)).module()
                # the program is fixed in the eval mode it was exported in; torch refuses train()/eval() on
                # it, which call() and vjp() use to set that same mode
                module.train = module.eval = types.MethodType(lambda self, mode=True: self, module)
                programs.add_module(f"p{i}", module)
                programs.signatures.append(sig)
            return programs, programs
        impl = import_spec(impl_spec)
        if fmt == "torch.save":
            # a whole pickled module is not loadable with weights_only=True: trusting the file is the deal
            module = torch.load(os.path.join(path, "layer.pt"), weights_only=False)
            return module, module
        if fmt == "state_dict":
            # a deployment's fresh instance of the class, from the constructor arguments, then the weights
            module = self.build(self.construct(impl, constructor or {}), examples[0])
            module.load_state_dict(torch.load(os.path.join(path, "state.pt"), weights_only=True), strict=True)
            return module, module
        raise NotApplicable(f"{fmt} is not a torch format", code="no_format")

    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        with torch.random.fork_rng(devices=[]):  # it seeds each build alike; the process's generator is kept
            return self._construction_run(impl, constructor, expected)

    def _construction_run(self, impl, constructor, expected):
        torch.manual_seed(0)
        plain = self.construct(impl, constructor)
        if not isinstance(plain, torch.nn.Module):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not an nn.Module", code="not_a_module")
        state = _module_state(plain)
        if not state:
            raise NotApplicable("the module holds no parameters or buffers: nothing for a factory keyword or an "
                                "initialisation to place", code="no_state")
        if any(isinstance(t, torch.nn.parameter.UninitializedTensorMixin) for t in state.values()):
            raise NotApplicable("a lazy module: its state takes its shape from the first call", code="lazy_module")
        torch.manual_seed(1)
        # slots that depend on the seed are random: they must be initialised (finite), not equal
        other = _module_state(self.construct(impl, constructor))
        random = {n for n, t in state.items() if n in other and not torch.equal(t, other[n])}
        return [_factory_part(self, impl, constructor, state),
                _meta_part(self, impl, constructor, state, random, expected["reset_parameters"] == "required")]

    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        import copy
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.func import functional_call
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        module = fn if isinstance(fn, torch.nn.Module) else None
        if module is not None:
            module.train(False)
        ways = []

        def said(way, run):
            try:
                with torch.no_grad():
                    out = run()
            except Exception as exc:
                return ways.append({"way": way, "error": self._abstract_error(exc)})
            if not isinstance(out, torch.Tensor):
                return ways.append({"way": way, "error": f"a {type(out).__name__}, not a tensor"})
            ways.append({"way": way, "shape": list(out.shape), "dtype": self.dtype_name(out)})

        def fake():
            mode = FakeTensorMode(allow_non_fake_inputs=True)
            xs = [mode.from_tensor(a) for a in args]
            if module is None:
                with mode:
                    return fn(*xs)
            state = {n: mode.from_tensor(t) for n, t in [*module.named_parameters(), *module.named_buffers()]}
            with mode:
                return functional_call(module, state, tuple(xs))
        said("torch FakeTensorMode", fake)

        def meta():
            xs = [a.to("meta") for a in args]
            if module is None:
                return fn(*xs)
            return copy.deepcopy(module).to("meta")(*xs)
        said("the meta device", meta)
        return ways

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        module = fn if isinstance(fn, torch.nn.Module) else _Calls(fn)
        module.train(False)
        first = tuple(self.tensor(a) for a in batches[0])
        batch = torch.export.Dim("batch")
        dims = tuple({axis: batch} if b else None for b in batched)
        dims = (dims,) if isinstance(module, _Calls) else dims  # _Calls.forward(*xs) takes one tuple
        try:
            program = torch.export.export(module, first, dynamic_shapes=dims).module()
        except Exception:
            custom = _custom_functions(module, first)
            if custom:
                raise NotApplicable(f"torch.export cannot hold the custom autograd.Function(s) {', '.join(custom)} "
                                    f"with a symbolic batch, as the export check says", code="untraceable") from None
            raise
        outs = []
        with torch.no_grad():
            for xs in batches:
                outs.append(_plain(program(*[self.tensor(a) for a in xs])))
        return {"way": f"torch.export with Dim('batch') on axis {axis}", "outputs": outs}


def _plain(t):
    """A tensor's values as numpy that crosses the wire: 16-bit floats widened to float32 (exact)."""
    t = t.detach().cpu()
    return (t.float() if t.dtype in (torch.bfloat16, torch.float16) else t.resolve_conj()).numpy()


class _Calls(torch.nn.Module):
    """A function contract's callable as the module torch.export and torch.save take."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class _Programs(torch.nn.Module):
    """Exported programs (per input rank and dtype, or per exact shapes), called as one layer."""

    def __init__(self):
        super().__init__()
        self.signatures = []

    def train(self, mode=True):
        return self  # each program is fixed in eval mode

    def forward(self, *xs):
        # exact-shape programs first: they exist where the dynamic one of that rank refuses the shapes
        order = sorted(range(len(self.signatures)), key=lambda i: any(s[2] is None for s in self.signatures[i]))
        for i in order:
            if _accepts(self.signatures[i], xs):
                return self._modules[f"p{i}"](*xs)
        raise ValueError(f"no exported program takes inputs {[(tuple(x.shape), str(x.dtype)) for x in xs]} "
                         f"(exported: {self.signatures})")


def _runs(program, args, refused) -> bool:
    try:
        program(*args)
        return True
    except refused:
        return False


def _accepts(sig, args, ranks_only=False) -> bool:
    """Whether a program exported for ``sig`` [(rank, dtype, shape or None)] takes tensors ``args``."""
    return len(sig) == len(args) and all(
        a.dim() == rank and str(a.dtype) == dtype and (ranks_only or shape is None or list(a.shape) == shape)
        for (rank, dtype, shape), a in zip(sig, args))


def _custom_functions(module, args) -> list[str]:
    """The custom autograd.Function classes one call of ``module`` goes through (their backward nodes)."""
    xs = [a.detach().clone().requires_grad_(a.is_floating_point() or a.is_complex()) for a in args]
    with torch.enable_grad():
        out = module(*xs)
    seen, stack, names = set(), [getattr(out, "grad_fn", None)], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            names.append(type(node).__name__.removesuffix("Backward"))
        stack.extend(n for n, _ in node.next_functions)
    return sorted(set(names))

class _Compiled:
    """torch.compile of one layer or function, with a counting backend in front of the real one:
    every graph Dynamo captures passes through it (AOTAutograd then traces its backward)."""

    def __init__(self, fn, backend):
        from torch._dynamo.backends.registry import lookup_backend
        # a fresh Dynamo cache: the layer's forward code is shared by every instance of its class,
        # and an earlier check's entries would count against the recompile limit
        torch._dynamo.reset()
        real = lookup_backend(backend)
        self.graphs, self.traces, self.breaks, self.guard_failures = 0, 0, [], []

        def counting(gm, example_inputs):
            self.graphs += 1
            return real(gm, example_inputs)
        self.fn = torch.compile(fn, backend=counting)

    def run(self, thunk):
        from torch._dynamo.utils import counters, guard_failures
        breaks_before = dict(counters["graph_break"])
        guards_before = {code: len(v) for code, v in guard_failures.items()}
        graphs_before = self.graphs
        try:
            return thunk()
        finally:
            if self.graphs > graphs_before:
                self.traces += 1
            for reason, n in counters["graph_break"].items():
                if n > breaks_before.get(reason, 0):
                    self.breaks.append(str(reason).strip().splitlines()[0])
            for code, reasons in guard_failures.items():
                for r in reasons[guards_before.get(code, 0):]:
                    # "0/0: CFG['scale'] == 1.0   # return g * CFG['scale']  # file:line in backward"
                    self.guard_failures.append(" ".join(str(r).split("\n")[0].split()))

# -- construction (the construction check) ------------------------------------------------------------------
def _module_state(module) -> dict:
    """Every parameter and buffer, persistent or not, by its dotted name."""
    return {**dict(module.named_buffers()), **dict(module.named_parameters())}


def _factory_part(adapter, impl, constructor, plain) -> dict:
    """``device=`` and ``dtype=``, where the constructor takes them, place every parameter and buffer."""
    part = "factory keyword arguments (device=, dtype=)"
    try:
        params = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        params = {}
    missing = [k for k in ("device", "dtype") if k not in params]
    if missing:
        return {"part": part, "not_applicable": f"the constructor takes no {' or '.join(k + '=' for k in missing)}"}
    problems = []
    for said, kwargs, ok, what in (
            ("device='meta'", {"device": "meta"}, lambda t: t.is_meta, lambda t: f"on {t.device.type}"),
            ("dtype=torch.float64", {"dtype": torch.float64},
             lambda t: not t.is_floating_point() or t.dtype == torch.float64,
             lambda t: f"in {str(t.dtype).replace('torch.', '')}")):
        try:
            layer = adapter.construct(impl, {**constructor, **kwargs})
        except Exception as exc:
            problems.append(f"constructing with {said} raised {type(exc).__name__}: {exc}")
            continue
        got = _module_state(layer)
        wrong = [f"{n!r} ({what(t)})" for n, t in got.items() if not ok(t)]
        if wrong:
            problems.append(f"constructed with {said}, {len(wrong)} of {len(got)} parameter(s) and buffer(s) are "
                            f"not placed there: {', '.join(wrong)}")
    return {"part": part, "problems": problems, "hint": "construction_factory_ignored" if problems else None}


def _resetters(module) -> list:
    return [m for m in module.modules() if callable(getattr(type(m), "reset_parameters", None))]


def _shown(adapter, t) -> str:
    return np.array2string(adapter.numpy(t), threshold=6, edgeitems=3)


def _meta_part(adapter, impl, constructor, plain, random, required) -> dict:
    """Construction under ``torch.device("meta")``, ``to_empty(device="cpu")``, every tensor filled with
    garbage (NaN, or a value unlike the plain build's), then ``reset_parameters`` of each module that defines
    it: the state must be a plain build's."""
    part = "construction on meta, to_empty and reset_parameters"
    try:
        with torch.device("meta"):
            layer = adapter.construct(impl, constructor)
    except Exception as exc:
        return {"part": part, "problems": [f"construction under torch.device('meta') raised "
                                           f"{type(exc).__name__}: {exc}"], "hint": None}
    if not _resetters(layer):
        if required:
            return {"part": part, "problems": ["the module (and every submodule) has no reset_parameters, which the "
                                               "contract requires (construction: {reset_parameters: required})"],
                    "hint": "construction_no_reset_parameters"}
        return {"part": part, "not_applicable": "no reset_parameters: after construction on meta, to_empty leaves "
                                                "uninitialised memory nothing resets; containers such as "
                                                "transformers' PreTrainedModel initialise through _init_weights"}
    try:
        layer = layer.to_empty(device="cpu")
    except Exception as exc:
        return {"part": part, "problems": [f"to_empty(device='cpu') after construction on meta raised "
                                           f"{type(exc).__name__}: {exc}"], "hint": None}
    with torch.no_grad():
        for n, t in _module_state(layer).items():
            want = plain.get(n)
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif want is not None and want.shape == t.shape and t.dtype == torch.bool:
                t.copy_(~want)
            elif want is not None and want.shape == t.shape:
                t.copy_(want + 1)
    torch.manual_seed(0)
    try:
        for m in _resetters(layer):
            m.reset_parameters()
    except Exception as exc:
        return {"part": part, "problems": [f"reset_parameters() after to_empty raised {type(exc).__name__}: {exc}"],
                "hint": None}
    got = _module_state(layer)
    problems = []
    for n, want in plain.items():
        t = got.get(n)
        if t is None:
            problems.append(f"{n!r} is missing after construction on meta")
            continue
        t = t.detach()
        if t.shape != want.shape or t.dtype != want.dtype:
            problems.append(f"{n!r} is {list(t.shape)} {t.dtype} after construction on meta, "
                            f"{list(want.shape)} {want.dtype} in a plain build")
            continue
        floating = t.is_floating_point() or t.is_complex()
        if floating and bool(torch.isnan(t).any()) and not bool(torch.isnan(want).any()):
            problems.append(f"{n!r} is left uninitialised (still NaN) by reset_parameters")
        elif n in random:
            if floating and not bool(torch.isfinite(t).all()):
                problems.append(f"{n!r} (randomly initialised) is not finite after reset_parameters")
        elif not (torch.equal(t, want) or (floating and bool(torch.equal(t.isnan(), want.isnan()))
                                            and torch.equal(t.nan_to_num(), want.nan_to_num()))):
            problems.append(f"{n!r} differs from a plain build's after reset_parameters ({_shown(adapter, t)}; a "
                            f"plain build has {_shown(adapter, want)})")
    return {"part": part, "problems": problems, "hint": "construction_reset_incomplete" if problems else None}
