"""TensorFlow / Keras 3 adapter.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import contextlib
import inspect
import os
import weakref

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the adapter drives Keras through TF's tape and devices
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from .base import Adapter, NotApplicable, import_spec  # noqa: E402
from .walk import walk_attributes  # noqa: E402


class _KerasInternals:
    """Keras's own bookkeeping attributes (registered state lives in them), plus TF's ``_self_*`` tracking."""
    names = frozenset(vars(keras.layers.Layer()))

    def __contains__(self, name):
        return name in self.names or name.startswith("_self_")


def _top_module(name) -> str:
    return (name or "").split(".")[0]


class FrameworkAdapter(Adapter):
    name = "tensorflow"
    module = "tensorflow"
    retraces_per_shape = True
    immutable_arrays = "TensorFlow tensors are immutable: a layer cannot change its input"
    cpu_device = "CPU:0"
    gpu_device = "GPU:0"

    def owns(self, obj) -> bool:
        if inspect.isclass(obj):
            return issubclass(obj, (keras.layers.Layer, tf.Module))
        if isinstance(obj, (keras.layers.Layer, keras.Variable, tf.Tensor, tf.Variable, tf.Module)):
            return True
        # @tf.custom_gradient returns a TF object (custom_gradient.Bind) that carries TF's decorator
        # record; its __module__ is the user's, so look at the wrapper itself.
        if getattr(obj, "_tf_decorator", None) is not None:
            return True
        return any(_top_module(m) in ("tensorflow", "keras")
                   for m in (type(obj).__module__, getattr(obj, "__module__", "")))

    def configure_early(self):
        # A second logical CPU gives the devices check somewhere to move to; TF allows this only
        # before its runtime starts, which a user module running ops at import time prevents.
        cpus = tf.config.list_physical_devices("CPU")
        try:
            tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
        except RuntimeError:
            pass


    def devices(self):
        cpus = [self._short(d.name) for d in tf.config.list_logical_devices("CPU")]
        return cpus[1:2] + (["GPU:0"] if tf.config.list_logical_devices("GPU") else [])

    @staticmethod
    def _short(device: str) -> str:
        spec = tf.DeviceSpec.from_string(device)
        return f"{spec.device_type}:{spec.device_index or 0}" if spec.device_type else device

    # -- tensors -----------------------------------------------------------------------
    def tensor(self, array, device=None):
        with tf.device(device) if device else contextlib.nullcontext():
            return tf.constant(np.asarray(array))

    def numpy(self, t):
        if not self.is_tensor(t):
            raise TypeError(f"expected a TensorFlow tensor, got {type(t).__name__}")
        return np.asarray(t.numpy())

    def is_tensor(self, obj):
        return isinstance(obj, (tf.Tensor, tf.Variable, keras.Variable))

    def dtype_name(self, t):
        return keras.backend.standardize_dtype(t.dtype)

    def device_of(self, t):
        # a Keras variable's placement is that of the tf.Variable it wraps
        return self._short((t.value if isinstance(t, keras.Variable) else t).device)

    # -- building and calling ----------------------------------------------------------------
    def call(self, layer, inputs, device=None, training=False):
        with tf.device(device) if device else contextlib.nullcontext():
            args = [a if self.is_tensor(a) else tf.constant(np.asarray(a)) for a in inputs]
            if isinstance(layer, keras.layers.Layer):
                return layer(*args, training=training)
            return layer(*args)

    def construct(self, factory, kwargs):
        # The Keras idiom __init__(self, ..., **kwargs) forwards to Layer.__init__, which rejects
        # arguments it does not know: pass only those named by the class or by Layer.__init__.
        if inspect.isclass(factory) and issubclass(factory, keras.layers.Layer):
            named = set()
            for f in (factory.__init__, keras.layers.Layer.__init__):
                named |= {p.name for p in inspect.signature(f).parameters.values()
                          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
            kwargs = {k: v for k, v in kwargs.items() if k in named}
        layer = super().construct(factory, kwargs)
        if isinstance(layer, keras.layers.Layer):
            _MADE[layer] = (factory, kwargs)  # to_dtype makes its twin the same way: no get_config needed
        return layer

    # -- state ---------------------------------------------------------------------------
    def _named(self, layer) -> dict:
        """Every weight (SeedGenerator state excluded) by its path below the layer's own path."""
        if not isinstance(layer, keras.layers.Layer):
            return {}
        # a variable created in __init__ keeps the path it had before the layer joined a container
        roots = [f"{r}/" for r in (layer.path, layer.name) if r]
        out = {}
        for v in layer.weights:
            root = next((r for r in roots if v.path.startswith(r)), "")
            name = v.path[len(root):]
            key, i = name, 1
            while key in out:
                key, i = f"{name}:{i}", i + 1
            out[key] = v
        return out

    def trainable(self, layer):
        ids = {id(v) for v in getattr(layer, "trainable_variables", [])}
        return {k: v for k, v in self._named(layer).items() if id(v) in ids}

    def non_trainable(self, layer):
        ids = {id(v) for v in getattr(layer, "trainable_variables", [])}
        return {k: v for k, v in self._named(layer).items() if id(v) not in ids}

    def optimizer_view(self, layer):
        return list(layer.trainable_variables)

    def untracked(self, layer):
        known = list(layer.variables)  # SeedGenerator state included: Keras tracks it
        registered = {id(v) for v in known} | {id(v.value) for v in known}

        def is_state(v):
            return isinstance(v, (tf.Variable, tf.Tensor, keras.Variable)) and id(v) not in registered

        def describe(v):
            kind = "tf.Variable" if isinstance(v, tf.Variable) else "keras.Variable" \
                if isinstance(v, keras.Variable) else "tensor"
            return f"{kind} {list(v.shape)}"

        def children(v):
            # sub-layers are reached through the attributes that hold them, under their attribute names
            return [] if isinstance(v, keras.layers.Layer) else None

        return walk_attributes(layer, is_state, children, describe, internal=_KerasInternals())

    def assign(self, layer, name, value):
        var = self._named(layer)[name]
        var.assign(np.asarray(value).astype(var.dtype))

    def serialized_state(self, layer):
        return dict(zip(self._named(layer), layer.get_weights()))

    def round_trip(self, layer, fresh):
        # set_weights is positional and raises on a count or shape mismatch
        fresh.set_weights(layer.get_weights())
        return fresh

    def export_state(self, layer):
        return layer.get_weights()

    def load_state(self, layer, saved, strict=True):
        if not strict:
            raise NotImplementedError("Keras's set_weights has no non-strict form")
        layer.set_weights(saved)
        return layer

    def alter_saved(self, layer, saved, drop=None, add=None):
        saved = list(saved)  # positional, in layer.weights order
        if drop is not None:
            var = self._named(layer)[drop]
            del saved[[id(w) for w in layer.weights].index(id(var))]
        if add is not None:
            saved.append(np.zeros(1, dtype=np.float32))
        return saved

    # -- composition and devices ---------------------------------------------------------------
    @staticmethod
    def _dense(units):
        init = keras.initializers.RandomNormal(stddev=0.3, seed=0)
        return keras.layers.Dense(units, kernel_initializer=init, bias_initializer=init)

    def sequential(self, layer, width):
        return keras.Sequential([self._dense(width), layer, self._dense(2)])

    def nest(self, layer, dense=None):
        # Keras's mode switch is the training= argument of the container's call (see call()). The
        # container takes the layer's dtype policy: under the global one its deferred input would
        # cast a float64 input to float32 on the way in
        policy = getattr(layer, "dtype_policy", None)
        previous = keras.config.dtype_policy()
        if policy is not None:
            keras.config.set_dtype_policy(policy)
        try:
            return keras.Sequential(([self._dense(dense[1])] if dense else []) + [layer])
        finally:
            keras.config.set_dtype_policy(previous)

    def manual_seed(self, seed):
        tf.random.set_seed(seed)

    def move(self, layer, device, rebuild=None):
        # Keras has no move call: placement is settled when variables are created
        if rebuild is None:
            raise NotImplementedError("a Keras layer is placed when built; moving needs rebuild()")
        with tf.device(device):
            return rebuild()

    # -- gradients ---------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs, wrt, cotangent):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        state = {**self.non_trainable(layer), **self.trainable(layer)}
        # The tape watches trainable variables by itself, as in training; non-trainable ones get None.
        with tf.GradientTape() as tape:
            for i in wrt:
                tape.watch(args[i])
            out = self.call(fn, args)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        ct = tf.cast(tf.constant(np.asarray(cotangent)), out.dtype)
        sources = [args[i] for i in wrt] + list(state.values())
        grads = tape.gradient(out, sources, output_gradients=ct) if sources else []
        input_grads = [None] * len(inputs)
        for i, g in zip(wrt, grads):
            input_grads[i] = g
        return out, input_grads, dict(zip(state, grads[len(wrt):]))

    # -- the vectorising transform (the batching check) ---------------------------------------
    @staticmethod
    def _vectorized(per_example, args, in_axes, axis):
        """tf.vectorized_map of ``per_example(*example)``, each example keeping a batch axis of one (a Keras
        layer is written for a batch: tf.matmul refuses a vector), the output's batch axis at ``axis``;
        shared inputs are closed over."""
        mapped = [i for i, a in enumerate(in_axes) if a is not None]

        def one(elems):
            full = list(args)
            for i, x in zip(mapped, elems):
                full[i] = tf.expand_dims(x, in_axes[i])
            return tf.nest.map_structure(lambda o: tf.squeeze(o, axis), per_example(*full))
        out = tf.vectorized_map(one, [tf.experimental.numpy.moveaxis(args[i], in_axes[i], 0) for i in mapped])
        return tf.nest.map_structure(lambda o: tf.experimental.numpy.moveaxis(o, 0, axis), out)

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        return self._vectorized(lambda *xs: self.call(fn, list(xs)), args, in_axes, axis)

    # measured (TF 2.21): the gradient of a tf.vectorized_map program is that of the program pfor made, in which
    # a tf.custom_gradient rule is not kept (scaled_tanh's halved gradient comes back whole)
    _NO_GRAD_OF_VMAP = ("TensorFlow differentiates tf.vectorized_map's vectorised program, which does not keep a "
                        "tf.custom_gradient rule")

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        ct = self.tensor(cotangent)

        def one(*xs_ct):
            *xs, c = xs_ct
            xs = list(xs)
            with tf.GradientTape() as tape:
                for i in wrt:
                    tape.watch(xs[i])
                o = self.call(fn, xs)
            grads = tape.gradient(o, [xs[i] for i in wrt], output_gradients=tf.cast(c, o.dtype))
            return [tf.zeros_like(xs[i]) if g is None else g for i, g in zip(wrt, grads)]
        per = self._vectorized(one, args + [ct], list(in_axes) + [axis], axis)
        vmap_of_grad = dict(zip(wrt, per))
        return {"grad_of_vmap": self._NO_GRAD_OF_VMAP,
                "vmap_of_grad": [vmap_of_grad.get(i) for i in range(len(inputs))]}

    def custom_rule_recorded(self, fn, inputs, wrt):
        specs = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in inputs]
        graph = tf.function(lambda *xs: self.call(fn, list(xs))).get_concrete_function(*specs).graph
        # tf.custom_gradient marks the op whose gradient it overrides
        return any("_gradient_op_type" in op.node_def.attr for op in graph.get_operations())

    def jvp(self, fn, layer, inputs, tangents):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        pushed = [(x, tf.cast(tf.constant(np.asarray(t)), x.dtype)) for x, t in zip(args, tangents) if t is not None]
        with tf.autodiff.ForwardAccumulator([x for x, _ in pushed], [t for _, t in pushed]) as acc:
            out = self.call(fn, args)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        tangent = acc.jvp(out)  # None where the output does not depend on the tangents
        return out, tf.zeros_like(out) if tangent is None else tangent

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        args = [a if self.is_tensor(a) else self.tensor(a) for a in inputs]
        sources = [args[i] for i in wrt]
        # the inner gradient runs inside the outer tape, which so records the backward rule's ops
        with tf.GradientTape() as outer:
            outer.watch(sources)
            with tf.GradientTape() as inner:
                inner.watch(sources)
                out = self.call(fn, args)
            if not isinstance(out, tf.Tensor):
                raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
            ct = tf.cast(tf.constant(np.asarray(cotangent)), out.dtype)
            grads = inner.gradient(out, sources, output_gradients=ct)
            dot = [tf.reduce_sum(g * tf.cast(tf.constant(np.asarray(directions[i])), g.dtype))
                   for i, g in zip(wrt, grads) if g is not None]
            total = tf.add_n(dot) if dot else None
        second = outer.gradient(total, sources) if total is not None else [None] * len(wrt)
        by_index = dict(zip(wrt, second))
        return [by_index.get(i) for i in range(len(inputs))]

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        raise NotApplicable(self.immutable_arrays, code="immutable_arrays")

    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["tf.function", "tf.function(jit_compile=True)"]

    def compile(self, fn, layer, compiler):
        if "jit_compile=True" in compiler:
            _xla_backend_unoptimized()
        return _Compiled(self, fn, layer, jit_compile="jit_compile=True" in compiler)

    def compiled_call(self, compiled, inputs, training=False):
        return compiled.forward(*[tf.constant(np.asarray(a)) for a in inputs], training=training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        return compiled.vjp(layer, [tf.constant(np.asarray(a)) for a in inputs], wrt, np.asarray(cotangent))

    def compile_stats(self, compiled):
        return {"traces": compiled.traces, "graphs": compiled.traces, "breaks": [], "guard_failures": []}

    def to_dtype(self, layer, dtype):
        """A twin in ``dtype``: the same class rebuilt under that dtype policy, with the weights copied."""
        if not isinstance(layer, keras.layers.Layer):
            return layer
        if getattr(layer.dtype_policy, "name", None) == dtype:  # made in it (a container nest() built)
            return layer
        made = _MADE.get(layer)  # as the harness made it, under the dtype policy below
        auto = getattr(getattr(layer, "_auto_config", None), "config", None)  # the constructor's arguments
        makers = [lambda: super(FrameworkAdapter, self).construct(*made)] if made is not None else []
        makers += [lambda: type(layer)(**{**auto, **({"dtype": dtype} if "dtype" in auto else {})})] \
            if auto is not None else []
        makers.append(lambda: type(layer).from_config({**layer.get_config(), "dtype": dtype}))
        previous = keras.config.dtype_policy()
        for make in makers:
            keras.config.set_dtype_policy(dtype)
            try:
                twin = make()
                twin.build_from_config(layer.get_build_config())
                twin.set_weights([np.asarray(w).astype(v.dtype) for w, v in zip(layer.get_weights(), twin.weights)])
            except Exception:
                continue
            finally:
                keras.config.set_dtype_policy(previous)
            # a weight created with an explicit float32 dtype would mix precisions in the twin
            return twin if all(w.dtype == dtype for w in twin.weights if "float" in w.dtype) else None
        return None

    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["keras", "savedmodel"] if isinstance(obj, keras.layers.Layer) else ["savedmodel"]

    def export_save(self, obj, fmt, examples, path):
        os.makedirs(path, exist_ok=True)
        if fmt == "keras":
            # the .keras file holds get_config() (rebuilt through from_config) and the weights
            keras.saving.save_model(obj, os.path.join(path, "layer.keras"))
            return {"gradients": "kept"}
        if fmt == "savedmodel":
            module = _Serving(obj)
            functions = [module.__call__.get_concrete_function(*[tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype))
                                                                  for a in xs]) for xs in examples]
            custom = any("_gradient_op_type" in op.node_def.attr for f in functions for op in f.graph.get_operations())
            tf.saved_model.save(module, os.path.join(path, "savedmodel"),
                                options=tf.saved_model.SaveOptions(experimental_custom_gradients=True))
            # The SavedModel holds the traced graph, and TensorFlow's graph optimizer may fuse or reorder
            # float ops that eager Keras runs one by one: values are bit-equal to the same graph run in
            # this process (a handle the check calls), not necessarily to eager execution.
            notes = {"gradients": "kept", "runs_as": module,
                     "runs_as_what": "the traced tf.function the SavedModel holds, run in the original process"}
            if custom:
                # what TensorFlow does with the custom gradient when the option is left out
                try:
                    tf.saved_model.save(module, os.path.join(path, "savedmodel_plain"),
                                        options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
                    notes["without_option"] = "saved"
                except Exception as exc:
                    notes["without_option"] = f"saving failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return notes
        raise NotApplicable(f"{fmt} is not a TensorFlow/Keras format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        if fmt == "keras":
            impl = import_spec(impl_spec)  # registers its serializables, as a deployment's import does
            custom = {impl.__name__: impl} if inspect.isclass(impl) else {}
            layer = keras.saving.load_model(os.path.join(path, "layer.keras"), custom_objects=custom)
            return layer, layer
        if fmt in ("savedmodel", "savedmodel_plain"):
            # TensorFlow alone: a SavedModel is a graph and needs no Python class
            loaded = tf.saved_model.load(os.path.join(path, fmt))
            return _Loaded(loaded), None
        raise NotApplicable(f"{fmt} is not a TensorFlow/Keras format", code="no_format")

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _POLICIES = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}

    def mixed_precision_policies(self, obj, function=False):
        if function or not (inspect.isclass(obj) and issubclass(obj, keras.layers.Layer)):
            raise NotApplicable("a Keras dtype policy belongs to a layer; a function computes in its inputs' dtypes", code="no_precision_policy")
        return [{"policy": name, "variables": "float32", "compute": compute, "output": compute,
                 "states_compute": True} for name, compute in self._POLICIES.items()]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        init = getattr(impl, "__init__", None)
        params = inspect.signature(init).parameters.values() if init is not None else ()
        takes_dtype = any(p.name == "dtype" or p.kind is p.VAR_KEYWORD for p in params)
        previous = keras.config.dtype_policy()
        if takes_dtype:
            # the layer's own policy, as Keras's run_layer_test does: nothing global changes
            mechanism = f"{impl.__name__}(..., dtype={policy!r})"
            layer = self.construct(impl, {**constructor, "dtype": policy})
        else:
            mechanism = f"keras.config.set_dtype_policy({policy!r}) around the constructor (it takes no dtype=)"
            keras.config.set_dtype_policy(policy)
            try:
                layer = self.construct(impl, constructor)
            finally:
                keras.config.set_dtype_policy(previous)
        self.build(layer, inputs)
        for name, value in (assign or {}).items():
            self.assign(layer, name, value)
        args = [self.tensor(a) for a in inputs]
        trainable = self.trainable(layer)
        with tf.GradientTape() as tape:
            for i in wrt:
                tape.watch(args[i])
            out = layer(*args, training=False)
        if not isinstance(out, tf.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
        grads, input_grads = {n: None for n in trainable}, [None] * len(args)
        if cotangent is not None:
            sources = [args[i] for i in wrt] + list(trainable.values())
            got = tape.gradient(out, sources, output_gradients=tf.cast(tf.constant(np.asarray(cotangent)), out.dtype))
            for i, g in zip(wrt, got):
                input_grads[i] = None if g is None else self.dtype_name(g)
            grads = {n: None if g is None else self.dtype_name(g) for n, g in zip(trainable, got[len(wrt):])}
        values = tf.cast(out, tf.float32) if out.dtype in (tf.float16, tf.bfloat16) else out
        return {"mechanism": mechanism, "output_dtype": self.dtype_name(out), "output": np.asarray(values.numpy()),
                "variables": {n: self.dtype_name(v) for n, v in self._named(layer).items()},
                "compute_dtype": keras.backend.standardize_dtype(layer.compute_dtype), "gradients": grads,
                "input_dtypes": [self.dtype_name(a) for a in args], "input_gradients": input_grads, "notes": []}

    def save_globals(self):
        return {"dtype policy": keras.config.dtype_policy().name, "floatx": keras.config.floatx(),
                "eager functions": tf.config.functions_run_eagerly()}

    def restore_globals(self, saved):
        now = self.save_globals()
        keras.config.set_floatx(saved["floatx"])
        keras.config.set_dtype_policy(saved["dtype policy"])
        tf.config.run_functions_eagerly(saved["eager functions"])
        return [f"keras {k}" for k in saved if now[k] != saved[k]]

    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        layer = self.construct(impl, constructor)
        if not isinstance(layer, keras.layers.Layer):
            raise NotApplicable(f"the constructor makes a {type(layer).__name__}, not a Keras layer", code="not_a_module")
        shapes = [tuple(np.shape(a)) for a in inputs]
        shape = shapes[0] if len(shapes) == 1 else shapes
        part = "build(input_shape) alone, before any call"
        problems, hint = [], None
        try:
            if not layer.built:
                layer.build(shape)
        except Exception as exc:
            problems.append(f"build({shape}) raised {type(exc).__name__}: {exc}")
        built = (sorted(self.trainable(layer)), sorted(self.non_trainable(layer)))
        out = self.call(layer, inputs)
        called = (sorted(self.trainable(layer)), sorted(self.non_trainable(layer)))
        if not problems and built != called:
            problems.append(f"build() alone made {len(built[0])} trainable and {len(built[1])} non-trainable "
                            f"weight(s) ({', '.join(built[0] + built[1]) or 'none'}), the first call "
                            f"{len(called[0])} and {len(called[1])} ({', '.join(called[0] + called[1]) or 'none'}; "
                            f"the contract declares {expected['trainable']} and {expected['non_trainable']}): the "
                            f"call creates weights")
            hint = "construction_weights_in_call"
        parts = [{"part": part, "problems": problems, "hint": hint}]
        part = "compute_output_shape on an unbuilt layer"
        if getattr(type(layer), "compute_output_shape", None) is keras.layers.Layer.compute_output_shape:
            parts.append({"part": part, "not_applicable": "the layer does not define compute_output_shape (Keras "
                                                          "infers the shape from a symbolic call)"})
            return parts
        problems = []
        fresh = self.construct(impl, constructor)
        try:
            said = fresh.compute_output_shape(shape)
        except Exception as exc:
            said = None
            problems.append(f"compute_output_shape({shape}) on an unbuilt layer raised {type(exc).__name__}: {exc} "
                            f"(Keras calls it before build; compute the shape from input_shape and the "
                            f"constructor's arguments, not from weights)")
        # whether the shape it says is the call's is the abstract check's (one mistake, one failing check)
        parts.append({"part": part, "problems": problems, "hint": None})
        return parts

    # -- shapes without data (the ``abstract`` check) ----------------------------------------------
    def abstract_outputs(self, fn, layer, inputs):
        arrays = [np.asarray(a) for a in inputs]
        ways = []

        def said(way, run, dtype=True):
            try:
                out = run()
            except Exception as exc:
                return ways.append({"way": way, "error": self._abstract_error(exc)})
            if isinstance(out, (list, tuple)) and len(out) == 1 and not dtype:
                out = out[0] if isinstance(out[0], (list, tuple)) else out
            shape = out if not dtype else getattr(out, "shape", None)
            if shape is None or (dtype and getattr(out, "dtype", None) is None):
                return ways.append({"way": way, "error": f"a {type(out).__name__}, not a tensor's spec"})
            shape = list(shape)
            if any(d is None for d in shape):
                return ways.append({"way": way, "error": f"a shape {shape} with an unknown dimension, though "
                                                         f"every input dimension is known"})
            ways.append({"way": way, "shape": [int(d) for d in shape],
                         "dtype": keras.backend.standardize_dtype(out.dtype) if dtype else None})

        if isinstance(layer, keras.layers.Layer):
            symbolic = [keras.KerasTensor(a.shape, dtype=keras.backend.standardize_dtype(a.dtype)) for a in arrays]
            said("a call on keras.KerasTensor inputs", lambda: layer(*symbolic, training=False))
            if type(layer).compute_output_shape is not keras.layers.Layer.compute_output_shape:
                said("compute_output_shape", lambda: layer.compute_output_shape(*[a.shape for a in arrays]),
                     dtype=False)
        else:
            specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in arrays]
            said("tf.function traced with TensorSpec inputs",
                 lambda: tf.function(lambda *xs: fn(*xs)).get_concrete_function(*specs).structured_outputs)
        return ways

    def symbolic_batch(self, fn, layer, batches, batched, axis):
        first = [np.asarray(a) for a in batches[0]]
        signature = []
        for a, on in zip(first, batched):
            shape = list(a.shape)
            if on:
                shape[axis] = None
            signature.append(tf.TensorSpec(shape, tf.as_dtype(a.dtype)))
        program = tf.function(lambda *xs: self.call(fn, list(xs)), input_signature=signature)
        outs = [self.numpy(program(*[tf.constant(np.asarray(a)) for a in xs])) for xs in batches]
        return {"way": f"tf.function with a None batch dimension on axis {axis} (one trace)", "outputs": outs}




class _Serving(tf.Module):
    """The layer or function as a SavedModel's traced signature (inference mode)."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    @tf.function
    def __call__(self, *xs):
        if isinstance(self.obj, keras.layers.Layer):
            return self.obj(*xs, training=False)
        return self.obj(*xs)


class _Loaded:
    """A loaded SavedModel, called like the original (its restored function dispatches on the signature)."""

    def __init__(self, loaded):
        self.loaded = loaded

    def __call__(self, *xs):
        return self.loaded(*xs)


def _xla_backend_unoptimized() -> None:
    """XLA's CPU backend generates code at LLVM's -O0 unless XLA_FLAGS sets the level (the full compiler:
    ``XLA_FLAGS=--xla_backend_optimization_level=3``). The check still runs XLA's whole HLO pipeline,
    where a layer's meaning can change (clustering, fusion, the custom gradient), in about a fifth less
    time. XLA reads the flags once, at its first compile in the process: later, this changes nothing."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_optimization_level=0".strip()


def _traced_by_the_harness(fn, jit_compile):
    """A tf.function the harness traces once per case shape, on purpose. TensorFlow warns of frequent
    retracing ("WARNING:tensorflow:5 out of the last 6 calls to <function _Compiled.vjp.<locals>.step>"),
    which reads as if the user's layer retraced: the switch TensorFlow sets on its own functions that retrace
    for a reason (restored SavedModel functions) turns it off for these alone."""
    function = tf.function(fn, jit_compile=jit_compile)
    function._omit_frequent_tracing_warning = True
    return function


# each layer the harness constructed -> (factory, arguments): a twin in another dtype is made the same way
_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Compiled:
    """The layer's call, and a whole gradient step (tape inside, as in a compiled training step),
    each a tf.function; ``traces`` counts the times the user's Python ran while tracing."""

    def __init__(self, adapter, fn, layer, jit_compile):
        self.traces = 0
        self._steps = {}
        self._adapter, self._layer, self._jit = adapter, layer, jit_compile

        def forward(*xs, training=False):
            self.traces += 1
            return adapter.call(fn, list(xs), training=training)
        self._python_forward = forward
        self.forward = _traced_by_the_harness(forward, jit_compile)

    def vjp(self, layer, args, wrt, cotangent):
        key = tuple(wrt)
        if key not in self._steps:
            adapter, forward = self._adapter, self._python_forward
            state = {**adapter.non_trainable(layer), **adapter.trainable(layer)}

            def step(xs, ct):
                xs = list(xs)
                with tf.GradientTape() as tape:
                    for i in wrt:
                        tape.watch(xs[i])
                    out = forward(*xs)
                if not isinstance(out, tf.Tensor):
                    raise TypeError(f"the output is a {type(out).__name__}, not a tf.Tensor")
                sources = [xs[i] for i in wrt] + list(state.values())
                grads = tape.gradient(out, sources, output_gradients=tf.cast(ct, out.dtype)) if sources else []
                return out, grads
            self._steps[key] = (_traced_by_the_harness(step, self._jit), list(state))
        step, names = self._steps[key]
        out, grads = step(args, tf.constant(cotangent))
        grads = list(grads)
        input_grads = [None] * len(args)
        for i, g in zip(wrt, grads):
            input_grads[i] = g
        return out, input_grads, dict(zip(names, grads[len(wrt):]))
