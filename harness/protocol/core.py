"""Build, call and hold a layer: detection, tensors, construction from the contract, state, containers, devices and the process's global state.

The layer side implements this protocol per framework in ``layerside/<framework>/core.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

import inspect
from typing import Any, Callable


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


class CoreProtocol:
    name: str = ""            # the --framework value: torch | tensorflow | jax | mxnet
    module: str = ""          # the top-level module whose presence in sys.modules marks the framework
    cpu_device: str = "cpu"
    gpu_device: str = "cuda"  # this framework's name for the first CUDA device
    settled_by: tuple = ()    # "module" or "module:attr" (called): the framework's own first-use patches (see layerside.server)
    preloaded: tuple = ()     # framework modules a fresh executor's loaders import on first use (the zygote has them)
    # framework modules a process imports on its first compilation (torch.compile: 0.7 s of a forked executor's
    # first compile): the zygote imports them while it waits, after the run's first forks, so that each later
    # target's executor has them without delaying the first
    preloaded_when_idle: tuple = ()
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
        """Whether this adapter has its own ``method`` (not its protocol's placeholder)."""
        owner = next((c for c in type(self).__mro__ if method in vars(c)), None)
        return owner is not None and not owner.__module__.startswith(__name__.rpartition(".")[0] + ".")

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

    def build(self, layer, inputs: list, device: str | None = None, kwargs: dict | None = None):
        """Make the layer's state exist (lazy shapes, initialize) by a first call; return the layer."""
        self.call(layer, inputs, device=device, kwargs=kwargs)
        return layer

    def call(self, layer, inputs: list, device: str | None = None, training: bool = False,
             kwargs: dict | None = None):
        """Run the layer on numpy inputs; returns the native output. ``kwargs``: keyword arguments of the call
        (a contract's ``native.<fw>.call.kwargs``: plain data)."""
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

    def save_globals(self):
        """Snapshot of process-global framework state a layer could change (dtype, RNG, threads...)."""
        return None

    def restore_globals(self, saved) -> list[str]:
        """Put the snapshot back; return what had changed, in words."""
        return []
