"""The one interface every framework implements. Checks are written once against it.

Conventions shared by every adapter:
- arrays crossing the interface are numpy arrays unless a method says "native";
- a *layer* is the user's object after ``build``; a *function* is wrapped by
  ``as_callable`` so that checks call both the same way;
- state is addressed by the framework's own dotted names (``gain``, ``0.weight``);
  ``layer_conformance.slots`` maps contract slots onto them.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable


# the one n/a exception (layer_conformance.record): an adapter raises it where the framework lacks the mechanism
# a check needs, with the reason; the runner records it as n/a
from ...record import NotApplicable  # noqa: F401  (re-exported: every adapter imports it from here)


def construct(factory, kwargs: dict):
    """Call a class or factory with the constructor arguments it accepts, by keyword."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return factory(**kwargs)
    params = sig.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return factory(**kwargs)
    accepted = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return factory(**{k: v for k, v in kwargs.items() if k in accepted})


def import_spec(spec: str | None):
    """The object ``module:attr`` names (a deployment imports the classes a saved file refers to)."""
    if not spec:
        return None
    import importlib
    mod_name, _, attr = spec.partition(":")
    obj = importlib.import_module(mod_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class Adapter:
    name: str = ""            # the --framework value: torch | tensorflow | jax | mxnet
    module: str = ""          # the top-level module whose presence in sys.modules marks the framework
    cpu_device: str = "cpu"
    gpu_device: str = "cuda"  # this framework's name for the first CUDA device
    settled_by: tuple = ()    # "module" or "module:attr" (called): the framework's own first-use patches (see executor)
    preloaded: tuple = ()     # framework modules a fresh executor's loaders import on first use (the zygote has them)
    # framework modules a process imports on its first compilation (torch.compile: 0.7 s of a forked executor's
    # first compile): the zygote imports them while it waits, after the run's first forks, so that each later
    # target's executor has them without delaying the first
    preloaded_when_idle: tuple = ()
    # whether every compiler of ``compilers`` traces anew for every new input shape, by design (tf.function
    # without reduce_retracing, jax.jit): the compiled check then tries one new batch size, since a second
    # can only repeat what the first showed (torch's automatic dynamic shapes recompiles once, then reuses)
    retraces_per_shape: bool = False
    # the framework's trainable wrapper as ``untracked`` describes it ("nn.Parameter [8]"), where one can be held
    # unregistered (in a plain list or dict): a hint then names the framework's container, not the wrapper
    parameter_type: str = ""
    # why a layer cannot change its input where the framework's arrays are immutable (aliasing's second part is
    # n/a, decided before the layer is built), else None
    immutable_arrays: str | None = None
    # the methods whose exception is the framework's answer that a check asks for, not a failure of the harness:
    # a strict load of a state that does not fit the layer must raise (strict_loading)
    refusals: tuple = ("load_state",)

    # -- detection and environment --------------------------------------------------------
    def implements(self, method: str) -> bool:
        """Whether this adapter has its own ``method`` (not the interface's placeholder)."""
        return getattr(type(self), method, None) is not getattr(Adapter, method, None)

    def owns(self, obj) -> bool:
        """True when ``obj`` (a class, factory or function) belongs to this framework."""
        raise NotImplementedError

    def configure_early(self) -> None:
        """Runs before any framework op (e.g. virtual devices); must not import other frameworks."""

    def devices(self) -> list[str]:
        """Devices the ``devices`` check moves to besides ``cpu_device`` (virtual ones included)."""
        raise NotImplementedError

    def is_virtual(self, device: str) -> bool:
        """A device with shapes but no values (torch ``meta``): outputs cannot be compared."""
        return False

    # -- tensors -------------------------------------------------------------------------
    def tensor(self, array, device: str | None = None):
        raise NotImplementedError

    def numpy(self, t):
        raise NotImplementedError

    def is_tensor(self, obj) -> bool:
        raise NotImplementedError

    def dtype_name(self, t) -> str:
        raise NotImplementedError

    def device_of(self, t) -> str:
        raise NotImplementedError

    # -- building and calling --------------------------------------------------------------
    def as_callable(self, obj) -> Callable:
        """For a function contract: the callable applying ``obj`` (e.g. ``Function.apply``)."""
        return obj

    def build(self, layer, inputs: list, device: str | None = None):
        """Make the layer's state exist (lazy shapes, initialize) by a first call; return the layer."""
        self.call(layer, inputs, device=device)
        return layer

    def call(self, layer, inputs: list, device: str | None = None, training: bool = False):
        """Run the layer on numpy inputs; returns the native output."""
        raise NotImplementedError

    def construct_native(self, cls, args: dict):
        """The framework's own layer from the contract's arguments (adapters add e.g. rngs)."""
        return cls(**args)

    def construct(self, factory, kwargs: dict):
        """The user's layer from the contract's constructor arguments (adapters add e.g. rngs)."""
        return construct(factory, kwargs)

    def built_with(self, impl, constructor: dict | None, inputs: list, assign: dict | None = None):
        """``(impl, layer)``: ``impl`` (an object or ``module:attr``) and, given ``constructor``, a layer of it
        built on ``inputs`` with the ``assign`` state set (None for a function)."""
        impl = import_spec(impl) if isinstance(impl, str) else impl
        if constructor is None:
            return impl, None
        layer = self.build(self.construct(impl, constructor), inputs)
        for name, value in (assign or {}).items():
            self.assign(layer, name, value)
        return impl, layer

    # -- state -------------------------------------------------------------------------
    def trainable(self, layer) -> dict[str, Any]:
        raise NotImplementedError

    def non_trainable(self, layer) -> dict[str, Any]:
        raise NotImplementedError

    def optimizer_view(self, layer) -> list:
        """What an optimizer is handed (``parameters()``, ``trainable_variables``...)."""
        raise NotImplementedError

    def untracked(self, layer) -> dict[str, str]:
        """Tensors or parameters held by the layer but invisible to the framework: path -> what."""
        raise NotImplementedError

    def assign(self, layer, name: str, value) -> None:
        raise NotImplementedError

    def serialized_state(self, layer) -> dict[str, Any]:
        """The framework's normal saved state, name -> numpy."""
        raise NotImplementedError

    def round_trip(self, layer, fresh):
        """Save ``layer``'s state the framework's normal way and strictly load it into ``fresh``."""
        raise NotImplementedError

    def export_state(self, layer):
        """``layer``'s state as the framework's normal checkpoint holds it (native and opaque:
        a torch state_dict, a Keras ``get_weights()`` list, flax bytes, a gluon parameter file)."""
        raise NotImplementedError

    def load_state(self, layer, saved, strict: bool = True):
        """Load ``export_state``'s result into ``layer`` the framework's normal way; with
        ``strict`` a missing or unexpected slot must raise whatever the framework raises
        (torch ``load_state_dict(strict=True)``, Keras ``set_weights``, flax ``from_bytes``,
        gluon ``load_parameters`` without allow_missing/ignore_extra). Returns the layer."""
        raise NotImplementedError

    def alter_saved(self, layer, saved, drop: str | None = None, add: str | None = None):
        """``export_state``'s result with the entry for ``drop`` (a name of ``serialized_state``)
        taken out, or with an extra entry ``add``: what ``strict_loading`` feeds the strict load."""
        raise NotImplementedError

    # -- composition and devices -----------------------------------------------------------
    def sequential(self, layer, width: int):
        """The layer inside the framework's Sequential, between two built-in dense layers."""
        raise NotImplementedError

    def nest(self, layer, dense: tuple[int, int] | None = None):
        """The layer as the last element of the framework's Sequential, after a built-in dense
        layer ``dense = (in, out)`` with seeded weights when given, else alone. ``call`` on the
        result with ``training=`` must switch mode the framework's normal way on the container
        (torch ``.train()``/``.eval()``, Keras ``training=``), never on the layer directly."""
        raise NotImplementedError

    def manual_seed(self, seed: int) -> None:
        """Seed the framework's global random generator(s) so a stochastic layer repeats."""
        raise NotImplementedError

    def move(self, layer, device: str, rebuild=None):
        """Move with the framework's normal call; return the moved layer.

        ``rebuild()`` constructs and builds a fresh layer with the same state values, for
        frameworks that settle placement at creation (Keras: build it under ``tf.device``).
        """
        raise NotImplementedError

    # -- gradients -------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent):
        """Gradient of sum(fn(*inputs) * cotangent).

        ``fn`` is the layer (or function) to call; ``layer`` holds the state whose gradients
        are wanted (None for a function). Returns (output, input_grads, state_grads) where
        input_grads[i] is the gradient for inputs[i] (None when the framework produced none)
        and state_grads maps every trainable *and* non-trainable name to a gradient or None.
        """
        raise NotImplementedError

    def jvp(self, fn, layer, inputs: list, tangents: list):
        """Forward mode: (output, tangent of the output) for ``fn(*inputs)`` pushed along
        ``tangents`` (one per input, None for an input held constant; state held constant).
        Both native. Frameworks without forward-mode autodiff mark such contracts not applicable."""
        raise NotImplementedError

    def custom_rule_recorded(self, fn, inputs: list, wrt: list[int]) -> bool | None:
        """Whether calling ``fn`` on ``inputs`` (differentiated at ``wrt``) records a custom backward rule that
        differentiation would run (torch.autograd.Function through apply, jax.custom_vjp...): the evidence that
        tells a rule that never ran from one that returned zeros. None where this framework cannot tell."""
        return None

    def hvp(self, fn, layer, inputs: list, wrt: list[int], cotangent, directions: list):
        """Second order: the gradient w.r.t. inputs[j] (j in ``wrt``) of
        sum_i <d/d inputs[i] sum(fn(*inputs) * cotangent), directions[i]> over i in ``wrt``,
        taken by differentiating the framework's own first-order gradient (so through a custom
        backward rule). ``directions`` has one array per input (None outside ``wrt``); state is
        held constant. Returns one gradient per input: None outside ``wrt``, or where the
        framework produced none."""
        raise NotImplementedError

    # -- the vectorising transform (the ``batching`` check) ---------------------------------
    def vmap_call(self, fn, layer, inputs: list, in_axes: list, axis: int, required: bool = False):
        """``fn`` (the layer in evaluation mode, or the function) under the framework's vectorising transform
        (``jax.vmap``/``nnx.vmap``, ``torch.func.vmap`` over ``functional_call``, ``tf.vectorized_map``),
        mapped over ``in_axes`` (one per input: its batch axis, or None for an input every example shares),
        the output's batch axis at ``axis``. Native. Raise ``NotApplicable`` where the framework has no such
        transform, or (unless ``required``) where it cannot hold the layer's custom rule, saying why."""
        raise NotImplementedError

    def vmap_vjp(self, fn, inputs: list, in_axes: list, axis: int, wrt: list[int], cotangent,
                 required: bool = False) -> dict:
        """For a function: {"grad_of_vmap": the gradient of sum(vmap(fn)(*inputs) * cotangent),
        "vmap_of_grad": each example's gradient of sum(fn(*example) * its cotangent), vectorised}, each a list
        with one gradient per input (None outside ``wrt``). ``NotApplicable`` as ``vmap_call``."""
        raise NotImplementedError

    # -- memory layout and aliasing (the ``layout`` and ``aliasing`` checks) -------------------
    def layouts(self, inputs: list) -> list[str]:
        """The memory layouts ``layout_vjp`` can give these inputs besides "contiguous" (torch: "transposed",
        "strided", "channels_last" for 4-D inputs). ``NotApplicable`` where the framework's arrays have none."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def layout_vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent, layout: str):
        """``vjp`` with every input and the output's gradient laid out in memory as ``layout`` says (same values,
        other strides). Returns (output, input_grads, state_grads) as ``vjp``, native."""
        raise NotApplicable("no strides: arrays have no memory layout the layer can see", code="no_strides")

    def aliased_vjp(self, fn, inputs: list, i: int, j: int, cotangent, compiled: str | None = None):
        """For a function: the gradient of sum(fn(*inputs) * cotangent) w.r.t. one tensor passed as both input
        ``i`` and input ``j`` (``inputs[j]`` is left out; the same native object goes in at both places),
        eagerly, or under ``compiled`` (one of ``compilers()``). Returns (output, gradient), native."""
        def twice(*xs):
            xs = list(xs)
            xs.insert(j, xs[i])
            return fn(*xs)
        rest = [a for k, a in enumerate(inputs) if k != j]
        wrt = [i if i < j else i - 1]
        if compiled is None:
            out, grads, _ = self.vjp(twice, None, rest, wrt, cotangent)
        else:
            out, grads, _ = self.compiled_vjp(self.compile(twice, None, compiled), None, rest, wrt, cotangent)
        return out, grads[wrt[0]]

    def input_changes(self, fn, layer, inputs: list, wrt: list[int], cotangent) -> dict:
        """Whether calling ``fn`` (and one backward pass for the inputs in ``wrt``) changes its inputs in place:
        {"forward": [indices of inputs changed by the call], "backward": [changed by the backward],
        "versions": [indices whose framework version counter moved] or None where the framework keeps none,
        "output": native, "input_grads": [...], "state_grads": {...}}. The inputs are fresh native arrays
        (not leaves of the graph, so that an in-place write is allowed where the framework allows it).
        ``NotApplicable`` where the framework's arrays cannot change."""
        raise NotImplementedError

    # -- the framework's compiler (the ``compiled`` check) ---------------------------------
    def compilers(self, backend: str | None = None) -> list[str]:
        """The compiler configurations the ``compiled`` check runs, in words (``backend``: the
        user's choice where the framework has several, e.g. torch.compile's)."""
        raise NotImplementedError

    def compile(self, fn, layer, compiler: str):
        """``fn`` (the layer, or the function as ``as_callable`` gives it; ``layer`` None for a
        function) under ``compiler``: an opaque object for ``compiled_call``/``compiled_vjp``
        that counts its traces. Raise ``NotApplicable`` where the mechanism cannot hold it."""
        raise NotImplementedError

    def compiled_call(self, compiled, inputs: list, training: bool = False):
        """The compiled output (native) in the given mode."""
        raise NotImplementedError

    def compiled_vjp(self, compiled, layer, inputs: list, wrt: list[int], cotangent):
        """``vjp`` with the forward and backward computed by the compiled program (eval mode)."""
        raise NotImplementedError

    def compile_stats(self, compiled) -> dict:
        """{"traces": times the user's Python ran under the compiler, "graphs": graphs captured,
        "breaks": [graph-break reasons], "guard_failures": [why a compiled graph was not reused]}."""
        raise NotImplementedError

    def eager_call(self, fn, inputs: list, training: bool = False, op_by_op: bool = True):
        """The uncompiled output, as ``call``. JAX: under ``jax.disable_jit()`` with ``op_by_op``, else as the
        adapter's own ``call``, which traces the Python on every call (as eager execution runs it) and runs
        the traced program compiled; the other frameworks' ``call`` is eager either way."""
        return self.call(fn, inputs, training=training)

    def eager_vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent, op_by_op: bool = True):
        """The uncompiled ``vjp`` (``op_by_op``: as ``eager_call``)."""
        return self.vjp(fn, layer, inputs, wrt, cotangent)

    def compilation_cache(self, directory: str) -> None:
        """Keep the programs this process compiles in ``directory``, and reuse those found there. The judge
        makes one directory per target and gives it to that target's processes only (its layer executor and
        its fresh ones), so that a fresh process does not compile again what the layer's process compiled
        for the identical program. Frameworks without such a cache leave this out."""
        raise NotImplementedError

    def save_globals(self):
        """Snapshot of process-global framework state a layer could change (dtype, RNG, threads...)."""
        return None

    def restore_globals(self, saved) -> list[str]:
        """Put the snapshot back; return what had changed, in words."""
        return []

    def to_float64(self, layer):
        """The layer in float64 for finite differences, or None where that is not possible."""
        return self.to_dtype(layer, "float64")

    def to_dtype(self, layer, dtype: str):
        """A copy of the layer with its floating state in ``dtype`` (a contract's ``dtypes``), or None
        where the framework cannot cast it; a function (not a layer) as it is. Raise ``NotApplicable``
        for a dtype the framework does not have."""
        return None

    # -- mixed precision (the ``mixed_precision`` check) ------------------------------------------
    def mixed_precision_policies(self, obj, function: bool = False) -> list[dict]:
        """The framework's mixed-precision mechanisms for ``obj`` (the user's class or factory; a function
        contract's function when ``function``), each plain data: {"policy": its name, in the framework's
        words, "variables": the dtype variables must keep, "compute": the 16-bit dtype computed in,
        "output": the dtype the output must have, or None where the mechanism does not fix it,
        "states_compute": the layer reports its compute dtype (Keras ``compute_dtype``), "isolated": applying
        it changes the process for good (run in a fresh one)}, or {"policy": name, "not_applicable": why}.
        Raises NotApplicable when the framework has none for ``obj``."""
        raise NotImplementedError

    def mixed_precision_run(self, impl, constructor, inputs: list, policy: str, assign=None, cotangent=None,
                            wrt=()) -> dict:
        """``impl`` (a handle, or ``module:attr`` in a fresh process) constructed from ``constructor`` (None for a
        function) under ``policy``, built, its state names in ``assign`` set, and called on ``inputs`` in
        inference mode; with ``cotangent``, one backward pass for the inputs in ``wrt`` and every trainable
        variable. Returns plain data: {"mechanism": how the policy was applied, in words, "variables": {name:
        dtype} after the call, "compute_dtype": the layer's own statement or None, "output_dtype",
        "output": numpy (16-bit floats widened to float32), "gradients": {trainable name: dtype or None},
        "input_dtypes", "input_gradients": [dtype or None per input], "notes": [what else was seen]}."""
        raise NotImplementedError

    # -- export: the framework's own whole-layer formats (the ``export`` check) -------------------
    def export_formats(self, obj) -> list[str]:
        """The framework's whole-layer save formats that can hold ``obj`` (a built layer, or a function
        contract's callable), in the order the export check runs them. Raises NotApplicable when none can."""
        raise NotImplementedError

    def export_save(self, obj, fmt: str, examples: list, path: str) -> dict:
        """Save ``obj`` whole in format ``fmt`` into the new directory ``path``, traced on each input list
        of ``examples`` where the format is a traced program. Returns plain notes; ``gradients`` says what
        the format keeps of the backward ("kept", or why not). Raises NotApplicable where the format
        cannot hold ``obj`` (the framework's reason)."""
        raise NotImplementedError

    def export_load(self, fmt: str, path: str, impl_spec: str | None = None, constructor: dict | None = None,
                    examples: list | None = None):
        """What ``export_save`` wrote, loaded the way a deployment loads it, in a process that has not
        built the layer: ``(callable, layer or None)`` for ``call``/``vjp``. ``impl_spec`` (module:attr)
        is imported first where the format refers to the user's Python classes; a format that holds
        weights only loads them into a fresh instance (``constructor`` arguments, built on ``examples[0]``)."""
        raise NotImplementedError

    # -- construction: the ways real code builds a layer (the ``construction`` check) ---------------------------
    def construction_run(self, impl, constructor: dict, inputs: list, expected: dict,
                         other: list | None = None) -> list[dict]:
        """``impl`` (a class or factory) constructed from ``constructor`` the ways real code builds a layer in
        this framework (torch: factory keyword arguments, construction on meta then ``to_empty`` and
        ``reset_parameters``; Keras: ``build(input_shape)`` alone, ``compute_output_shape`` unbuilt; NNX:
        ``nnx.eval_shape`` and a repeated seed; Gluon: deferred initialisation), each compared with a plain
        build's state (``inputs``: the first case's, for a call where one is needed). ``expected``: {"trainable":
        the contract's count of trainable slots, "non_trainable": of the others, "reset_parameters": "optional"
        or "required"}. ``other``: another case's inputs (other shapes; None where every case has the first's),
        for a way whose first call infers the state's shapes (Gluon's deferred initialisation), which must infer
        the plain build's from it. Returns one plain dict per way: {"part": the way, in words, and either
        "not_applicable": why, or "problems": [what differs, naming the slots], "hint": a hint id of
        ``checks/mistakes.py`` or None}. Raises NotApplicable where no way applies to the layer."""
        raise NotImplementedError

    # -- shapes without data (the ``abstract`` check) ---------------------------------------
    def abstract_outputs(self, fn, layer, inputs: list) -> list[dict]:
        """The output's shape and dtype computed without data, in evaluation mode, once per way the framework
        has: [{"way": words, "shape": [int], "dtype": name as ``dtype_name``}, or with "error": what it raised
        (the layer's failure), or with "na": why this way cannot run here]."""
        raise NotImplementedError

    def symbolic_batch(self, fn, layer, batches: list, batched: list, axis: int) -> dict:
        """One program with the batch axis ``axis`` of the ``batched`` inputs symbolic (traced or exported once,
        from ``batches[0]``), run on each input list of ``batches``: {"way": words, "outputs": [numpy]}. Raise
        ``NotApplicable`` where the framework cannot hold the layer that way (saying why)."""
        raise NotImplementedError

    @staticmethod
    def _abstract_error(exc) -> str:
        """What an abstract evaluation raised, in one line: the type, its message's lines (a Keras error's
        first line only names the call), cut at 600 characters, and where in the user's code."""
        from ...errors import unexpected_error
        text = " ".join(line.strip() for line in unexpected_error(exc).splitlines() if line.strip())
        cut = text.rfind(" (at ")
        body, where = (text[:cut], text[cut:]) if cut > 0 and text.endswith(")") else (text, "")
        return (body if len(body) <= 600 else body[:597] + "...") + where
