"""JAX / Flax NNX: building, calling and holding a layer (detection, tensors, construction, state, containers,
devices, the process's global state), and the helpers the other areas of this folder share.

Registered state is ``nnx.Variable`` objects: ``nnx.Param`` is trainable, any other Variable
subclass (``class Buffer(nnx.Variable)``) is non-trainable, RNG state (``nnx.RngState``) is left
out. Names are dotted state paths (``gain``, ``layers.1.gain``). A raw jax array attribute is
reported as untracked: no Variable filter (nnx.grad, ``nnx.Optimizer(wrt=nnx.Param)``) sees it.
A plain function is not recognised as JAX unless it is a ``custom_vjp``/``custom_jvp``/``jit``
wrapper or names ``jax``/``jnp`` itself: pass ``--framework jax`` otherwise.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import contextlib
import inspect
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, serialization

from ...protocol.autodiff import Gradients
from ...protocol.core import CoreProtocol
from ..common import walk_attributes


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
# Measured with LAYER_CONFORMANCE_JAX_COMPILE_LOG (below), one bundled rmsnorm, every default check and dtype:
# 129 XLA compilations made in the run's four JAX processes before issue 47's placement and device_put changes,
# 110 after (the layer executor 56 -> 47, the native's 23 -> 19, the export check's 12 -> 6, the compiled
# check's 38, most of them its deliberate op-by-op eager reference).
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


def _committed_alike(args):
    """``args`` with every uncommitted array (and numpy array) committed to the one device the committed arrays
    are on, which is where jit runs them anyway: the program is the same, but its arguments' placement is part
    of both the in-process key and the persistent cache's (the lowered shardings), so without this a layer whose
    state is uncommitted (loaded, or built on the default device) and an input put on a device compile one program
    twice, here and in each fresh executor of the target. Unchanged where nothing or more than one device is
    committed (jit's own rules then apply as they are)."""
    leaves, tree = jax.tree.flatten(args)
    devices = {a.sharding for a in leaves if isinstance(a, jax.Array) and getattr(a, "_committed", True)}
    if len(devices) != 1:
        return args
    (sharding,) = devices
    return jax.tree.unflatten(tree, [jax.device_put(a, sharding) if isinstance(a, np.ndarray) or (
        isinstance(a, jax.Array) and not getattr(a, "_committed", True)) else a for a in leaves])


def _compiled(traceable, args):
    """``traceable(*args)`` traced and run as one compiled program, or None where it cannot be.

    Eager JAX compiles every primitive for every new shape (~20 ms each on CPU); one program per traced
    function is far fewer compilations. The function is traced on every call, so the user's Python runs
    once per call as it would eagerly; only the compilation is reused, for the identical program. None
    (the caller then runs eagerly) when tracing fails: Python control flow on values, numpy conversions,
    a custom rule that is not traceable. The eager run then gives the verdict, its own error included."""
    try:
        args = _committed_alike(args)
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


class JaxCore(CoreProtocol):
    name = "jax"
    module = "flax"
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

    def call(self, layer, inputs, device=None, training=False, kwargs=None):
        kw = kwargs or {}  # plain data: traced as constants of the program
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) and device is None else self.tensor(a, device) for a in inputs]
            if not isinstance(layer, nnx.Module):
                done = _compiled(lambda *xs: layer(*xs, **kw), args)
                return done[0] if done else layer(*args, **kw)
            layer.train() if training else layer.eval()
            try:
                graphdef, state = nnx.split(layer)
            except Exception:  # whatever it is, the eager call says it the usual way
                return layer(*args, **kw)
            pure = []  # set by the trace: the call left the layer as it was

            def run(state, xs):
                model = nnx.merge(graphdef, jax.tree.map(lambda v: v, state))
                out = model(*xs, **kw)
                after, new_state = nnx.split(model)
                pure.append(after == graphdef and all(a is b for a, b in zip(jax.tree.leaves(state),
                                                                             jax.tree.leaves(new_state))))
                return out
            done = _compiled(run, (state, args))
            # a call that writes its state (RNG counters, running statistics, attributes) runs eagerly
            # on the layer itself, so that the writes land where they would
            return done[0] if done and pure == [True] else layer(*args, **kw)

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
        # cast by numpy and put by device_put: a cast on the device, and jnp.asarray of a numpy array, each
        # compile a program per shape and dtype (issue 47)
        def kernel(key, shape, dtype=jnp.float32):
            drawn = np.random.default_rng(seed).standard_normal(shape) / np.sqrt(shape[0])
            return jax.device_put(drawn.astype(dtype))

        def zeros(key, shape, dtype=jnp.float32):
            return jax.device_put(np.zeros(shape, dtype))
        return nnx.Linear(n_in, n_out, rngs=nnx.Rngs(seed), kernel_init=kernel, bias_init=zeros)

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

    # -- gradients: the pure function the autodiff and compile areas trace ----------------------------
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


def _gradients(adapter, layer, out, n, wrt, x_grads, p_grads) -> Gradients:
    """A vjp's reply from a pullback's gradients: one per input (None outside ``wrt``), and every state name's
    (non-trainable state is never differentiated: None)."""
    by_index = dict(zip(wrt, x_grads))
    state_grads = {k: None for k in adapter.non_trainable(layer)}
    if p_grads:
        state_grads.update({".".join(map(str, k)): _value(g) for k, g in nnx.to_flat_state(p_grads)})
    return Gradients(output=out, inputs=tuple(by_index.get(i) for i in range(n)), state=state_grads)


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
        return _gradients(self._adapter, self._layer, out, len(args), wrt, x_grads, p_grads)



def _count_compiles(path):
    """A debug switch, LAYER_CONFORMANCE_JAX_COMPILE_LOG=<file> (with --sandbox off: a sandboxed executor cannot
    write outside its private /tmp): each jaxpr trace, XLA compilation and persistent-cache hit of this process,
    a line each (pid, event, the outermost adapter method, seconds), and each program's signature as JAX logs it.
    JAX records a compilation for a cache hit too: the compilations made are the compiles less the hits."""
    import logging
    import sys
    from jax import monitoring

    def log(line):
        with open(path, "a") as out:
            out.write(f"{os.getpid()} {line}\n")

    def listener(event, duration=0.0, **_):
        if event.endswith(("jaxpr_trace_duration", "backend_compile_duration", "cache_hits")):
            f, where = sys._getframe(1), "?"
            while f is not None:  # the outermost frame of this folder: the request a check made
                if "/layerside/jax/" in f.f_code.co_filename:
                    where = f"{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}"
                f = f.f_back
            log(f"{event.rsplit('/', 1)[-1]} {where} {duration:.4f}")

    class Programs(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("Compiling"):
                log(f"program {record.getMessage()[:300]!r}")
    monitoring.register_event_duration_secs_listener(listener)
    monitoring.register_event_listener(listener)
    jax.config.update("jax_log_compiles", True)
    logging.getLogger("jax").addHandler(Programs())


if os.environ.get("LAYER_CONFORMANCE_JAX_COMPILE_LOG"):
    _count_compiles(os.environ["LAYER_CONFORMANCE_JAX_COMPILE_LOG"])
