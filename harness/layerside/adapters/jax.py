"""JAX / Flax NNX adapter.

Registered state is ``nnx.Variable`` objects: ``nnx.Param`` is trainable, any other Variable
subclass (``class Buffer(nnx.Variable)``) is non-trainable, RNG state (``nnx.RngState``) is left
out. Names are dotted state paths (``gain``, ``layers.1.gain``). A raw jax array attribute is
reported as untracked: no Variable filter (nnx.grad, ``nnx.Optimizer(wrt=nnx.Param)``) sees it.
A plain function is not recognised as JAX unless it is a ``custom_vjp``/``custom_jvp``/``jit``
wrapper or names ``jax``/``jnp`` itself: pass ``--framework jax`` otherwise.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve.
"""
from __future__ import annotations

import contextlib
import inspect
import types

import jax
import jax.numpy as jnp
import numpy as np
import flax
from flax import nnx, serialization

from .base import Adapter, NotApplicable, import_spec
from .walk import walk_attributes

_MODULE_INTERNALS = frozenset(vars(nnx.Module()))
_SAVED = nnx.All(nnx.Variable, nnx.Not(nnx.RngState))   # what is saved, named and compared
_JAX_MODULES = ("jax", "jaxlib", "flax")


def _name(device) -> str:
    """cpu:0, cpu:1, and cuda for the first GPU (as --device cuda names it), cuda:1..."""
    if device.platform == "gpu":
        return "cuda" if device.id == 0 else f"cuda:{device.id}"
    return f"{device.platform}:{device.id}"


def _value(t):
    return t[...] if isinstance(t, nnx.Variable) else t


def _seeded(layer) -> dict:
    """Every nnx.Variable of the module, its RNG streams (nnx.RngState) included: what a seed makes."""
    return {".".join(map(str, path)): v for path, v in nnx.iter_graph(layer) if isinstance(v, nnx.Variable)}


def _takes_rngs(factory) -> bool:
    """Whether the constructor takes an ``rngs`` argument (``construct`` passes one)."""
    try:
        params = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory).parameters
    except (TypeError, ValueError):
        return False
    return "rngs" in params


def _seed_value(v) -> np.ndarray:
    """A variable's value as numpy; a typed PRNG key as its key data."""
    x = _value(v)
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


def _x64(needed: bool):
    """64-bit types for this block only: jax_enable_x64 must not stay on for the rest of the process."""
    enable = getattr(jax, "enable_x64", None)
    if enable is None:  # older jax
        enable = getattr(getattr(jax, "experimental", None), "enable_x64", None)
    return enable(True) if needed and enable is not None else contextlib.nullcontext()


def _flat(tree, prefix="") -> dict:
    """Nested dicts as {dotted path: leaf}."""
    out = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _unflat(flat: dict) -> dict:
    out: dict = {}
    for k, v in flat.items():
        *parents, leaf = k.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = v
    return out


def _wants_x64(*arrays) -> bool:
    return any(getattr(a, "dtype", None) == np.float64 for a in arrays)


# Compiled programs by what was traced (see _compiled). Bounded: a long session traces many shapes.
_COMPILED: dict = {}
_COMPILED_MAX = 512


def _program_key(traced, args):
    """What decides the compiled program: the jaxpr text (shapes, dtypes, every literal), the values of the
    constants it closed over, and where each argument lives. None where a compiled copy may act differently
    from the traced code: a host callback (its Python function is not in the text), a constant committed to
    a device (eager code would refuse to mix devices)."""
    closed = traced.jaxpr
    text = str(closed)
    if "callback" in text:
        return None
    consts = []
    for c in closed.consts:
        if isinstance(c, jax.Array) and getattr(c, "_committed", True):
            return None
        a = np.asarray(c)
        consts.append((a.dtype.str, a.shape, a.tobytes()))
    places = tuple((getattr(a, "sharding", None), getattr(a, "_committed", None), getattr(a, "weak_type", None))
                   for a in jax.tree.leaves(args))
    return (text, tuple(consts), str(jax.tree.structure(args)), places, jax.config.jax_enable_x64,
            str(jax.config.jax_default_device))


class _NotAnArray(Exception):
    """vjp's function returned something else (the name of its type)."""


def _compiled(traceable, args):
    """``traceable(*args)`` traced and run as one compiled program, or None where it cannot be.

    Eager JAX compiles every primitive for every new shape (~20 ms each on CPU); one program per traced
    function is far fewer compilations. The function is traced on every call, so the user's Python runs
    once per call as it would eagerly; only the compilation is reused, for the identical program. None
    (the caller then runs eagerly) when tracing fails: Python control flow on values, numpy conversions,
    a custom rule that is not traceable. The eager run then gives the verdict, its own error included."""
    try:
        traced = jax.jit(traceable).trace(*args)
        key = _program_key(traced, args)
        if key is None:
            return None
        program = _COMPILED.get(key)
        if program is None:
            program = traced.lower().compile()
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.pop(next(iter(_COMPILED)))
            _COMPILED[key] = program
        return (program(*args),)
    except Exception:  # not traceable as a whole: eager it is (CheckTimeout is a BaseException)
        return None


class FrameworkAdapter(Adapter):
    name = "jax"
    module = "flax"
    retraces_per_shape = True
    immutable_arrays = "JAX arrays are immutable: a layer cannot change its input"
    # what the first call of a loaded jax.export program imports: its lowering initializes LAPACK through
    # scipy.linalg (0.5 s) and emits MHLO (0.14 s), in every fresh executor without them
    preloaded = ("scipy.linalg", "jaxlib.mlir.dialects.mhlo")

    def configure_early(self):
        # A second host device for the devices check; possible only before JAX's first operation
        # (the user's module may already have imported jax, which is fine).
        try:
            jax.config.update("jax_num_cpu_devices", max(2, jax.config.jax_num_cpu_devices))
        except (RuntimeError, AttributeError):
            pass
        self.cpu_device = _name(jax.devices("cpu")[0])

    def owns(self, obj) -> bool:
        if inspect.isclass(obj):
            return issubclass(obj, nnx.Module)
        if isinstance(obj, (nnx.Module, jax.Array)):
            return True
        # custom_vjp / custom_jvp / jit objects are instances of JAX's own types
        if type(obj).__module__.split(".")[0] in _JAX_MODULES:
            return True
        code, scope = getattr(obj, "__code__", None), getattr(obj, "__globals__", {})
        return code is not None and any(isinstance(scope.get(n), types.ModuleType)
                                        and scope[n].__name__.split(".")[0] in _JAX_MODULES for n in code.co_names)


    def devices(self):
        cpus = jax.devices("cpu")
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        return [_name(d) for d in cpus[1:2] + gpus[:1]]

    def _device(self, name):
        return next(d for d in jax.devices() + jax.devices("cpu") if _name(d) == (name or self.cpu_device))

    def compilation_cache(self, directory):
        # JAX's persistent cache, keyed by the program (its StableHLO), the compile options and the jaxlib:
        # the same key is the same executable. Every program is kept, however quick: a fresh process would
        # otherwise compile each of them again. JAX opens its cache once; reset_cache makes the next
        # compilation open this directory.
        from jax.experimental.compilation_cache import compilation_cache as cache
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        cache.set_cache_dir(directory)
        cache.reset_cache()

    def save_globals(self):
        return {"x64": jax.config.jax_enable_x64, "default device": jax.config.jax_default_device,
                "compilation cache": jax.config.jax_compilation_cache_dir}

    def restore_globals(self, saved):
        changed = [f"jax {k}" for k, v in self.save_globals().items() if v != saved[k]]
        jax.config.update("jax_enable_x64", saved["x64"])
        jax.config.update("jax_default_device", saved["default device"])
        if jax.config.jax_compilation_cache_dir != saved["compilation cache"]:  # never another target's cache
            self.compilation_cache(saved["compilation cache"])
        return changed

    # -- tensors -----------------------------------------------------------------------
    def tensor(self, array, device=None):
        return jax.device_put(np.asarray(array), self._device(device))

    def numpy(self, t):
        t = _value(t)
        if not isinstance(t, jax.Array):
            raise TypeError(f"expected a jax.Array, got {type(t).__name__}")
        return np.asarray(jax.device_get(t))

    def is_tensor(self, obj):
        return isinstance(obj, jax.Array)

    def dtype_name(self, t):
        return str(_value(t).dtype)

    def device_of(self, t):
        return ",".join(sorted(_name(d) for d in _value(t).devices()))

    # -- building and calling ----------------------------------------------------------------
    def construct(self, factory, kwargs):
        """By keyword, the arguments the constructor accepts, plus ``rngs`` where it takes one."""
        # NNX classes show their metaclass's (*args, **kwargs): read __init__ instead
        try:
            params = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory).parameters
        except (TypeError, ValueError):
            params = None
        if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs = {k: v for k, v in kwargs.items() if k in params}
        if params is not None and "rngs" in params and "rngs" not in kwargs:
            kwargs = {**kwargs, "rngs": nnx.Rngs(0)}
        with jax.default_device(self._device(None)):
            return factory(**kwargs)

    def construct_native(self, cls, args):
        return self.construct(cls, args)

    def call(self, layer, inputs, device=None, training=False):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) and device is None else self.tensor(a, device) for a in inputs]
            if not isinstance(layer, nnx.Module):
                done = _compiled(lambda *xs: layer(*xs), args)
                return done[0] if done else layer(*args)
            layer.train() if training else layer.eval()
            try:
                graphdef, state = nnx.split(layer)
            except Exception:  # whatever it is, the eager call says it the usual way
                return layer(*args)
            pure = []  # set by the trace: the call left the layer as it was

            def run(state, xs):
                model = nnx.merge(graphdef, jax.tree.map(lambda v: v, state))
                out = model(*xs)
                after, new_state = nnx.split(model)
                pure.append(after == graphdef and all(a is b for a, b in zip(jax.tree.leaves(state),
                                                                             jax.tree.leaves(new_state))))
                return out
            done = _compiled(run, (state, args))
            # a call that writes its state (RNG counters, running statistics, attributes) runs eagerly
            # on the layer itself, so that the writes land where they would
            return done[0] if done and pure == [True] else layer(*args)

    # -- state ---------------------------------------------------------------------------
    def _variables(self, layer) -> dict:
        if not isinstance(layer, nnx.Module):
            return {}
        return {".".join(map(str, path)): v for path, v in nnx.iter_graph(layer)
                if isinstance(v, nnx.Variable) and not isinstance(v, nnx.RngState)}

    def trainable(self, layer):
        return {k: v for k, v in self._variables(layer).items() if isinstance(v, nnx.Param)}

    def non_trainable(self, layer):
        return {k: v for k, v in self._variables(layer).items() if not isinstance(v, nnx.Param)}

    def optimizer_view(self, layer):
        # what nnx.Optimizer(model, tx, wrt=nnx.Param) updates
        return list(self.trainable(layer).values())

    def untracked(self, layer):
        return walk_attributes(layer, lambda v: isinstance(v, jax.Array),
                               lambda v: () if isinstance(v, nnx.Module) else None,
                               describe=lambda v: f"jax array {list(v.shape)}", internal=_MODULE_INTERNALS)

    def assign(self, layer, name, value):
        var = self._variables(layer)[name]
        old = var[...]
        # a float64 layer's value: outside x64 device_put would round it to float32
        with _x64(old.dtype == np.float64):
            var[...] = jax.device_put(np.asarray(value, dtype=old.dtype), old.sharding)

    def serialized_state(self, layer):
        return {k: np.asarray(v) for k, v in _flat(nnx.to_pure_dict(nnx.state(layer, _SAVED))).items()}

    def round_trip(self, layer, fresh):
        return self.load_state(fresh, self.export_state(layer), strict=True)

    def export_state(self, layer):
        return serialization.to_bytes(nnx.to_pure_dict(nnx.state(layer, _SAVED)))

    def load_state(self, layer, saved, strict=True):
        target = nnx.state(layer, _SAVED)
        template = nnx.to_pure_dict(target)
        restored = serialization.msgpack_restore(saved)
        want, got = _flat(serialization.to_state_dict(template)), _flat(restored)
        if strict:  # flax raises for missing keys itself, but drops unexpected ones and never compares shapes
            problems = [f"unexpected key(s) {sorted(set(got) - set(want))}"] if set(got) - set(want) else []
            problems += [f"{k}: saved {np.asarray(got[k]).dtype}{list(np.shape(got[k]))} does not fit "
                         f"{np.asarray(v).dtype}{list(np.shape(v))}" for k, v in want.items() if k in got
                         and (np.shape(v) != np.shape(got[k]) or np.asarray(v).dtype != np.asarray(got[k]).dtype)]
            if problems:
                raise ValueError("the saved state does not match the layer: " + "; ".join(problems))
        else:
            restored = _unflat({k: got.get(k, v) for k, v in want.items()})
        values = serialization.from_state_dict(template, restored)
        # from_bytes gives numpy arrays: back onto the devices the layer's state is on
        nnx.replace_by_pure_dict(target, jax.tree.map(lambda w, v: jax.device_put(np.asarray(v), w.sharding),
                                                      template, values))
        nnx.update(layer, target)
        return layer

    def alter_saved(self, layer, saved, drop=None, add=None):
        flat = _flat(serialization.msgpack_restore(saved))
        if drop is not None:
            flat.pop(drop)
        if add is not None:
            flat[add] = np.zeros(1, dtype=np.float32)
        return serialization.msgpack_serialize(_unflat(flat))

    # -- composition and devices ---------------------------------------------------------------
    @staticmethod
    def _linear(n_in, n_out, seed):
        """An nnx.Linear whose kernel numpy draws (lecun normal's scale): jax.random's default initializer
        compiles threefry for each shape, about a second in each new executor, for weights any values serve."""
        def kernel(key, shape, dtype=jnp.float32):
            return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) / np.sqrt(shape[0]), dtype)
        return nnx.Linear(n_in, n_out, rngs=nnx.Rngs(seed), kernel_init=kernel)

    def sequential(self, layer, width):
        with jax.default_device(self._device(None)):
            return nnx.Sequential(self._linear(width, width, 0), layer, self._linear(width, 2, 1))

    def nest(self, layer, dense=None):
        with jax.default_device(self._device(None)):
            return nnx.Sequential(*([self._linear(*dense, 0)] if dense else []), layer)

    def manual_seed(self, seed):
        """Nothing to seed: JAX has no global generator; NNX layers draw from the nnx.Rngs they
        were constructed with (``construct`` passes nnx.Rngs(0)), so a run repeats as it is."""

    def move(self, layer, device, rebuild=None):
        # Variables only: flax >= 0.12 also carries raw array attributes in nnx.state, but they are not
        # registered state, and the devices check reports them.
        nnx.update(layer, jax.device_put(nnx.state(layer, nnx.Variable), self._device(device)))
        return layer

    # -- gradients ---------------------------------------------------------------------------
    def _pure(self, fn, layer, chosen):
        """``fn(*args)`` as a pure function of (the chosen inputs, the other inputs, the trainable state,
        the rest of the state) for jax.vjp and jax.jvp, and those values. The layer itself is never
        touched: each trace runs a copy merged from its state."""
        if not isinstance(layer, nnx.Module):
            graphdef, params, rest = None, {}, {}
        else:
            graphdef, params, rest = nnx.split(layer, nnx.Param, ...)

        def pure(xs, others, ps, rest):
            full = list(others)
            for i, x in zip(chosen, xs):
                full[i] = x
            if graphdef is None:
                return fn(*full)
            # fresh Variables (tree.map rebuilds them) at this trace level: a layer may write its state
            model = nnx.merge(graphdef, *jax.tree.map(lambda x: x, (ps, rest)))
            model.eval()
            return model(*full)
        return pure, params, rest

    @staticmethod
    def _one_program(whole, values):
        """``whole(*values)`` compiled as one program, or run eagerly where it cannot be traced."""
        done = _compiled(whole, values)
        return done[0] if done else whole(*values)

    def custom_rule_recorded(self, fn, inputs, wrt):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            program = str(jax.make_jaxpr(lambda *xs: fn(*xs))(*args))
        return "custom_vjp_call" in program or "custom_jvp_call" in program  # nested programs printed too

    def vjp(self, fn, layer, inputs, wrt, cotangent):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)

            def whole(xs, others, ps, rest, ct):
                out, pullback = jax.vjp(lambda xs, ps: pure(xs, others, ps, rest), xs, ps)
                if not isinstance(out, jax.Array):
                    raise _NotAnArray(type(out).__name__)
                return (out, *pullback(jnp.asarray(ct, dtype=out.dtype)))
            try:
                out, x_grads, p_grads = self._one_program(
                    whole, ([args[i] for i in wrt], args, params, rest, np.asarray(cotangent)))
            except _NotAnArray as exc:  # raised here, so that the message points at vjp as it always has
                raise TypeError(f"the output is a {exc}, not a jax.Array") from None
        by_index = dict(zip(wrt, x_grads))
        state_grads = {k: None for k in self.non_trainable(layer)}  # non-trainable state is never differentiated
        if p_grads:
            state_grads.update({".".join(map(str, k)): _value(g) for k, g in nnx.to_flat_state(p_grads)})
        return out, [by_index.get(i) for i in range(len(inputs))], state_grads

    def jvp(self, fn, layer, inputs, tangents):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pushed = [i for i, t in enumerate(tangents) if t is not None]
            pure, params, rest = self._pure(fn, layer, pushed)

            def whole(xs, others, ps, rest, ts):
                return jax.jvp(lambda *xs: pure(xs, others, ps, rest), xs, ts)
            return self._one_program(whole, ([args[i] for i in pushed], args, params, rest,
                                             [jnp.asarray(np.asarray(tangents[i]), dtype=args[i].dtype)
                                              for i in pushed]))

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)
            dirs = [jnp.asarray(np.asarray(directions[i]), dtype=args[i].dtype) for i in wrt]

            def whole(xs, others, ps, rest, ct, dirs):
                def gradient_dot(xs):
                    # jax.grad of this traces the first-order pullback, custom bwd rule included
                    out, pullback = jax.vjp(lambda xs: pure(xs, others, ps, rest), xs)
                    (grads,) = pullback(jnp.asarray(ct, dtype=out.dtype))
                    return sum(jnp.vdot(g, d) for g, d in zip(grads, dirs))
                return jax.grad(gradient_dot)(xs)
            second = self._one_program(whole, ([args[i] for i in wrt], args, params, rest,
                                               np.asarray(cotangent), dirs))
        by_index = dict(zip(wrt, second))
        return [by_index.get(i) for i in range(len(inputs))]

    # -- the vectorising transform (the batching check) ---------------------------------------
    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            if not isinstance(layer, nnx.Module):
                return jax.vmap(lambda *xs: fn(*xs), in_axes=tuple(in_axes), out_axes=axis)(*args)
            layer.eval()
            # nnx.vmap on the layer itself, as a user vectorises a Module: its state shared by every example,
            # and what the call writes to the layer lands on it (so a second call sees it)
            return nnx.vmap(lambda model, *xs: model(*xs), in_axes=(None, *in_axes), out_axes=axis)(layer, *args)

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]

            def of_wrt(xs, base):
                full = list(base)
                for i, x in zip(wrt, xs):
                    full[i] = x
                return full

            def whole(args, ct):
                vectorised = jax.vmap(lambda *xs: fn(*xs), in_axes=tuple(in_axes), out_axes=axis)
                out, pull = jax.vjp(lambda *xs: vectorised(*of_wrt(xs, args)), *[args[i] for i in wrt])
                grad_of_vmap = pull(jnp.asarray(ct, dtype=out.dtype))

                def one(example, c):
                    o, pull = jax.vjp(lambda *xs: fn(*of_wrt(xs, example)), *[example[i] for i in wrt])
                    return pull(jnp.asarray(c, dtype=o.dtype))
                vmap_of_grad = jax.vmap(one, in_axes=(list(in_axes), axis), out_axes=axis)(args, ct)
                return grad_of_vmap, vmap_of_grad
            # eager: an argument JAX holds static (nondiff_argnums) cannot be a jit tracer
            grad_of_vmap, vmap_of_grad = whole(args, self.tensor(cotangent))
        a, b = dict(zip(wrt, grad_of_vmap)), dict(zip(wrt, vmap_of_grad))
        return {"grad_of_vmap": [a.get(i) for i in range(len(inputs))],
                "vmap_of_grad": [b.get(i) for i in range(len(inputs))]}

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _MIXED = "dtype=bfloat16, param_dtype=float32"

    def mixed_precision_policies(self, obj, function=False):
        if function or not inspect.isclass(obj):
            raise NotApplicable("flax's dtype/param_dtype are a Module's constructor arguments; a function computes "
                              "in its inputs' dtypes", code="no_precision_policy")
        try:
            params = inspect.signature(obj.__init__).parameters
        except (TypeError, ValueError):
            params = {}
        missing = [a for a in ("dtype", "param_dtype") if a not in params]
        if missing:
            raise NotApplicable(f"the constructor takes no {' or '.join(missing)} argument (flax.nnx's convention "
                              f"for mixed precision: params created in param_dtype, computed in dtype)", code="no_precision_policy")
        return [{"policy": self._MIXED, "variables": "float32", "compute": "bfloat16", "output": "bfloat16"}]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        layer = self.construct(impl, {**constructor, "dtype": jnp.bfloat16, "param_dtype": jnp.float32})
        self.build(layer, inputs)
        for name, value in (assign or {}).items():
            self.assign(layer, name, value)
        trainable = self.trainable(layer)
        grads, input_grads = {n: None for n in trainable}, [None] * len(inputs)
        if cotangent is not None:
            out, x_grads, p_grads = self.vjp(layer, layer, inputs, list(wrt), cotangent)
            input_grads = [None if g is None else self.dtype_name(g) for g in x_grads]
            grads = {n: None if p_grads.get(n) is None else self.dtype_name(p_grads[n]) for n in trainable}
        else:
            out = self.call(layer, inputs)
        if not isinstance(out, jax.Array):
            raise TypeError(f"the output is a {type(out).__name__}, not a jax.Array")
        values = out.astype(jnp.float32) if out.dtype in (jnp.bfloat16, jnp.float16) else out
        return {"mechanism": f"{impl.__name__}(..., {policy})", "output_dtype": self.dtype_name(out),
                "output": np.asarray(values), "compute_dtype": None, "gradients": grads,
                "variables": {n: self.dtype_name(v) for n, v in self._variables(layer).items()},
                "input_dtypes": [str(np.asarray(a).dtype) for a in inputs], "input_gradients": input_grads,
                "notes": []}

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        raise NotApplicable(self.immutable_arrays, code="immutable_arrays")

    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["jax.jit"]

    def compile(self, fn, layer, compiler):
        return _Compiled(self, fn, layer)

    def compiled_call(self, compiled, inputs, training=False):
        with _x64(_wants_x64(*inputs)):
            return compiled.call([self.tensor(a) for a in inputs], training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        with _x64(_wants_x64(*inputs)):
            return compiled.vjp([self.tensor(a) for a in inputs], wrt, np.asarray(cotangent))

    def compile_stats(self, compiled):
        return {"traces": compiled.traces, "graphs": compiled.traces, "breaks": [], "guard_failures": []}

    def eager_call(self, fn, inputs, training=False, op_by_op=True):
        # op by op compiles every primitive for every new shape (about 1.4 s for an RMSNorm's forward and
        # backward); the adapter's own call traces the Python on every call and compiles the program it
        # traced (reused only when identical), which is eager execution's semantics at a program's cost
        if not op_by_op:
            return self.call(fn, inputs, training=training)
        with jax.disable_jit(), _x64(_wants_x64(*inputs)):
            args = [self.tensor(a) for a in inputs]
            if isinstance(fn, nnx.Module):
                fn.train() if training else fn.eval()
            return fn(*args)

    def eager_vjp(self, fn, layer, inputs, wrt, cotangent, op_by_op=True):
        if not op_by_op:
            out, x_grads, state_grads = self.vjp(fn, layer, inputs, wrt, cotangent)
            if isinstance(layer, nnx.Module):  # the layer's own call, as below
                out = self.call(fn, inputs)
            return out, x_grads, state_grads
        with jax.disable_jit(), _x64(_wants_x64(*inputs)):
            args = [self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)
            out, pullback = jax.vjp(lambda xs, ps: pure(xs, args, ps, rest), [args[i] for i in wrt], params)
            if not isinstance(out, jax.Array):
                raise TypeError(f"the output is a {type(out).__name__}, not a jax.Array")
            x_grads, p_grads = pullback(jnp.asarray(np.asarray(cotangent), dtype=out.dtype))
            if isinstance(layer, nnx.Module):
                # the pullback ran on a merged copy; the output is the layer's own call, so that what the
                # layer does to itself in Python (a counter, a cache) happens as it does eagerly
                layer.eval()
                out = fn(*args)
        return out, *_by_input(self, layer, len(inputs), wrt, x_grads, p_grads)

    def to_dtype(self, layer, dtype):
        if not isinstance(layer, nnx.Module):
            return layer
        copy = nnx.clone(layer)
        with _x64(dtype == "float64"):
            if dtype == "float64" and not jax.config.jax_enable_x64:
                return None  # no local x64 switch in this jax
            nnx.update(copy, jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating)
                                          else x, nnx.state(copy)))
        return copy

    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["jax.export", "nnx"] if isinstance(obj, nnx.Module) else ["jax.export"]

    def export_save(self, obj, fmt, examples, path):
        import os
        import pickle
        os.makedirs(path, exist_ok=True)
        if fmt == "jax.export":
            from jax import export
            if isinstance(obj, nnx.Module):
                obj.eval()
                graphdef, state = nnx.split(obj)
                fn = lambda *xs: nnx.merge(graphdef, state)(*xs)  # noqa: E731  (state baked in as constants)
            else:
                fn = obj
            for i, xs in enumerate(examples):
                with _x64(_wants_x64(*xs)):
                    shapes = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in xs]
                    try:  # one trace: the export's own
                        exported = export.export(jax.jit(fn))(*shapes)
                    except (jax.errors.UnexpectedTracerError, jax.errors.ConcretizationTypeError) as exc:
                        # what the harness's own calls do with it too: such a function runs eagerly only
                        raise NotApplicable("jax.export holds programs traced with abstract inputs, and this one "
                                          "cannot be traced that way: " + str(exc).splitlines()[0], code="untraceable") from None
                    # vjp_order=1: without it the deserialized program has no VJP at all
                    blob = exported.serialize(vjp_order=1)
                with open(os.path.join(path, f"program{i}.bin"), "wb") as f:
                    f.write(blob)
            return {"gradients": "kept", "state_gradients": "the state is baked into the program as constants"}
        if fmt == "nnx":
            graphdef, state = nnx.split(obj)
            # the graph definition pickles by class (a deployment imports the module); the state as numpy
            with open(os.path.join(path, "layer.pkl"), "wb") as f:
                pickle.dump((graphdef, jax.tree.map(_to_numpy_keeping_keys, state)), f)
            return {"gradients": "kept"}
        raise NotApplicable(f"{fmt} is not a JAX format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        import glob
        import os
        import pickle
        if fmt == "jax.export":
            from jax import export
            programs = {}
            for name in sorted(glob.glob(os.path.join(path, "program*.bin"))):
                with open(name, "rb") as f:
                    program = export.deserialize(bytearray(f.read()))
                programs[tuple((tuple(a.shape), str(a.dtype)) for a in program.in_avals)] = program

            def call(*xs):
                key = tuple((tuple(np.shape(a)), str(a.dtype)) for a in xs)
                if key not in programs:
                    raise ValueError(f"no exported program for inputs {key} (exported: {sorted(programs)})")
                return programs[key].call(*xs)
            return call, None
        if fmt == "nnx":
            import_spec(impl_spec)
            with open(os.path.join(path, "layer.pkl"), "rb") as f:
                graphdef, state = pickle.load(f)
            with jax.default_device(self._device(None)):
                layer = nnx.merge(graphdef, jax.tree.map(_from_numpy_keeping_keys, state,
                                                         is_leaf=lambda v: isinstance(v, _KeyData)))
            return layer, layer
        raise NotApplicable(f"{fmt} is not a JAX format", code="no_format")

    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        plain = self.construct(impl, constructor)
        if not isinstance(plain, nnx.Module):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not an nnx.Module: no state for "
                                f"nnx.eval_shape to describe or a seed to repeat", code="not_a_module")
        # RNG streams (nnx.RngState) too: left out of the saved state, but made from the seed like the rest
        real = {n: (tuple(jnp.shape(_value(v))), str(_value(v).dtype)) for n, v in _seeded(plain).items()}
        if not real:
            raise NotApplicable("the module holds no nnx.Variable: no state for nnx.eval_shape to describe or a seed "
                                "to repeat", code="no_state")
        part = "nnx.eval_shape(lambda: Layer(...))"
        problems, hint = [], None
        try:
            abstract = nnx.eval_shape(lambda: self.construct(impl, constructor))
        except Exception as exc:
            problems.append(f"constructing the layer under nnx.eval_shape raised {type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            hint = "construction_reads_in_init"
        else:
            raw = [getattr(v, "get_raw_value", None) for v in _seeded(abstract).values()]
            got = {n: (tuple(a.shape), str(a.dtype)) for n, a in
                   ((n, r() if r else getattr(v, "raw_value", v)) for (n, v), r in
                    zip(_seeded(abstract).items(), raw))}
            for n in sorted(set(real) | set(got)):
                if n not in got:
                    problems.append(f"{n!r} is missing from the abstract state")
                elif n not in real:
                    problems.append(f"{n!r} is in the abstract state only")
                elif got[n] != real[n]:
                    problems.append(f"{n!r} is {list(got[n][0])} {got[n][1]} abstractly, {list(real[n][0])} "
                                    f"{real[n][1]} when built")
        parts = [{"part": part, "problems": problems, "hint": hint}]
        part = "two constructions with the same nnx.Rngs seed"
        twin = self.construct(impl, constructor)
        values = {n: _seed_value(v) for n, v in _seeded(twin).items()}
        made = _seeded(plain)
        differ = [n for n, v in made.items() if n in values and
                  not np.array_equal(_seed_value(v), values[n], equal_nan=True)]
        streams = [n for n in differ if isinstance(made[n], nnx.RngState)]
        fix = "; ".join((["draw every random value from rngs (rngs.params())"] if len(streams) < len(differ) else [])
                        + (["fork each RNG stream from the rngs given (rngs.dropout.fork()), not from a new "
                            "nnx.Rngs seeded elsewhere"] if streams else []))
        problems = [f"{', '.join(map(repr, differ))} {'differs' if len(differ) == 1 else 'differ'} between two "
                    f"constructions with nnx.Rngs(0){' (RNG stream state)' if streams else ''}: the constructor "
                    f"draws from a source other than the nnx.Rngs it is given (numpy or Python's random, the time, "
                    f"a global counter); {fix}"] if differ else []
        parts.append({"part": part, "problems": problems, "hint": None})
        if _takes_rngs(impl):
            parts.append(self._another_seed(impl, constructor, made, values))
        return parts

    def _another_seed(self, impl, constructor, made, values) -> dict:
        """A third construction, with nnx.Rngs(1): a constructor that takes rngs and draws from a seed of its own
        (nnx.Rngs(0) inside) makes the same RNG streams and random parameters whatever seed it is given."""
        reseeded = self.construct(impl, {**constructor, "rngs": nnx.Rngs(1)})
        other = {n: _seed_value(v) for n, v in _seeded(reseeded).items()}
        same = [n for n in values if n in other and np.array_equal(values[n], other[n], equal_nan=True)]
        streams = [n for n, v in made.items() if isinstance(v, nnx.RngState)]
        drawn = [n for n, v in made.items() if isinstance(v, nnx.Param) and np.size(values.get(n, ())) > 1
                 and np.ptp(np.asarray(values[n], dtype=np.float64)) > 0]   # non-constant: drawn, not filled
        stuck = ([n for n in streams if n in same] if streams and all(n in same for n in streams) else []) \
            + ([n for n in drawn if n in same] if drawn and all(n in same for n in drawn) else [])
        problems = [f"{', '.join(map(repr, stuck))} {'is' if len(stuck) == 1 else 'are'} the same under nnx.Rngs(0) "
                    f"and nnx.Rngs(1): the constructor takes rngs and ignores the seed it is given (it draws from an "
                    f"nnx.Rngs of its own, or a fixed key); draw every random value, and fork every RNG stream, from "
                    f"the rngs given"] if stuck else []
        return {"part": "a construction with another nnx.Rngs seed", "problems": problems, "hint": None}

    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        with _x64(_wants_x64(*inputs)):
            # 0-d inputs (a setting, as JAX's nondiff_argnums takes it) stay Python scalars, as in ``compile``
            static = _Compiled._static([np.asarray(a) for a in inputs], ())
            shapes = [None if i in static else jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)
                      for i, a in enumerate(inputs)]
            full = lambda xs: [static.get(i, a) for i, a in enumerate(xs)]  # noqa: E731
            if isinstance(layer, nnx.Module):
                layer.eval()
                way, run = "nnx.eval_shape", lambda: nnx.eval_shape(lambda model, *xs: model(*full(xs)), layer,
                                                                    *shapes)
            else:
                way, run = "jax.eval_shape", lambda: jax.eval_shape(lambda *xs: fn(*full(xs)), *shapes)
            try:
                out = run()
            except Exception as exc:
                return [{"way": way, "error": self._abstract_error(exc)}]
        if not hasattr(out, "shape") or not hasattr(out, "dtype"):
            return [{"way": way, "error": f"a {type(out).__name__}, not an array"}]
        return [{"way": way, "shape": list(out.shape), "dtype": str(out.dtype)}]

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        from jax import export
        first = batches[0]
        with _x64(_wants_x64(*first)):
            (b,) = export.symbolic_shape("b")
            static = _Compiled._static([np.asarray(a) for a in first], ())
            specs = []
            for i, (a, on) in enumerate(zip(first, batched)):
                shape = list(np.shape(a))
                if on:
                    shape[axis] = b
                specs.append(None if i in static else jax.ShapeDtypeStruct(tuple(shape), np.asarray(a).dtype))
            full = lambda xs: [static.get(i, a) for i, a in enumerate(xs)]  # noqa: E731
            arrays = lambda xs: [None if i in static else self.tensor(a) for i, a in enumerate(xs)]  # noqa: E731
            if isinstance(layer, nnx.Module):
                layer.eval()
                graphdef, state = nnx.split(layer)
                program = export.export(jax.jit(lambda st, *xs: nnx.merge(graphdef, st)(*full(xs))))(state, *specs)
                run = lambda xs: program.call(state, *arrays(xs))  # noqa: E731
            else:
                program = export.export(jax.jit(lambda *xs: fn(*full(xs))))(*specs)
                run = lambda xs: program.call(*arrays(xs))  # noqa: E731
            outs = [np.asarray(jax.device_get(run(xs))) for xs in batches]
        return {"way": f"jax.export with a symbolic batch b on axis {axis}", "outputs": outs}




class _KeyData:
    """A PRNG key array as pickled plain data (typed keys refuse numpy conversion)."""

    def __init__(self, data, impl):
        self.data, self.impl = data, impl


def _to_numpy_keeping_keys(v):
    if isinstance(v, jax.Array) and jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key):
        return _KeyData(np.asarray(jax.random.key_data(v)), str(jax.random.key_impl(v)))
    return np.asarray(v)


def _from_numpy_keeping_keys(v):
    if isinstance(v, _KeyData):
        return jax.random.wrap_key_data(jnp.asarray(v.data), impl=v.impl)
    return jnp.asarray(v)

def _by_input(adapter, layer, n, wrt, x_grads, p_grads):
    by_index = dict(zip(wrt, x_grads))
    state_grads = {k: None for k in adapter.non_trainable(layer)}
    if p_grads:
        state_grads.update({".".join(map(str, k)): _value(g) for k, g in nnx.to_flat_state(p_grads)})
    return [by_index.get(i) for i in range(n)], state_grads


class _Compiled:
    """The layer as a user compiles it: split once (the graph definition is static), the state
    passed in as arrays, one ``jax.jit`` program per mode and per set of differentiated inputs.
    ``traces`` counts the times the user's Python ran while JAX traced."""

    def __init__(self, adapter, fn, layer):
        self.traces = 0
        self._adapter, self._fn, self._layer = adapter, fn, layer
        self._programs = {}

    def _split(self):
        if not isinstance(self._layer, nnx.Module):
            return None, {}, {}
        return nnx.split(self._layer, nnx.Param, ...)

    @staticmethod
    def _static(args, wrt):
        """0-d inputs not differentiated (a setting such as JAX's nondiff_argnums): static arguments
        to jax.jit, as JAX requires for them, so Python scalars baked into the program."""
        return {i: a.item() for i, a in enumerate(args) if i not in wrt and a.ndim == 0}

    def call(self, args, training):
        static = self._static(args, ())
        key = ("call", training, tuple(sorted(static.items())))
        graphdef, params, rest = self._split()
        args = [None if i in static else a for i, a in enumerate(args)]
        if key not in self._programs:
            fn = self._fn

            def run(xs, ps, rest):
                self.traces += 1
                xs = [static.get(i, a) for i, a in enumerate(xs)]
                if graphdef is None:
                    return fn(*xs)
                model = nnx.merge(graphdef, *jax.tree.map(lambda x: x, (ps, rest)))
                model.train() if training else model.eval()
                return model(*xs)
            self._programs[key] = jax.jit(run)
        return self._programs[key](args, params, rest)

    def vjp(self, args, wrt, cotangent):
        static = self._static(args, wrt)
        key = ("vjp", tuple(wrt), tuple(sorted(static.items())))
        _, params, rest = self._split()
        if key not in self._programs:
            pure, _, _ = self._adapter._pure(self._fn, self._layer, wrt)

            def whole(xs, others, ps, rest, ct):
                self.traces += 1
                others = [static.get(i, a) for i, a in enumerate(others)]
                out, pullback = jax.vjp(lambda xs, ps: pure(xs, others, ps, rest), xs, ps)
                if not isinstance(out, jax.Array):
                    raise TypeError(f"the output is a {type(out).__name__}, not a jax.Array")
                return (out, *pullback(jnp.asarray(ct, dtype=out.dtype)))
            self._programs[key] = jax.jit(whole)
        others = [None if i in static else a for i, a in enumerate(args)]
        out, x_grads, p_grads = self._programs[key]([args[i] for i in wrt], others, params, rest, cotangent)
        return out, *_by_input(self._adapter, self._layer, len(args), wrt, x_grads, p_grads)
