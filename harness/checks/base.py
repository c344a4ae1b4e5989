"""What every check shares: outcomes, the per-target context, slot matching."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import is_floating, np_dtype
from .. import inputs as inputs_mod
from ..protocol import NotApplicablePart
from ..record import NotApplicable
from ..state_map import StateMapError, Held, parse as parse_held, shapes as held_shapes, slot_value, variable_value

if TYPE_CHECKING:
    from ..boundary.remote import RemoteAdapter


class CheckFailed(AssertionError):
    """The implementation broke the contract. ``details`` go to the results file."""

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.message = message
        self.details = details


# Two ideas, two names, two record forms. n/a (``NotApplicable``; record: skipped, ``not_applicable`` true) says
# the check has no meaning here: the framework lacks the mechanism, the layer has no such thing, the contract says
# so. A plain skip (``CheckSkipped``; record: skipped, ``not_applicable`` false; ``unavailable`` true for a
# missing device) says the check means something here and was not run: the contract author opted out
# (``checks.<id>.skip``), the machine lacks a device (a framework's adapter without a method the check needs is n/a:
# ``checks.applicable.adapter_lacks``). A skip is a hole in
# what was checked, n/a is not, which is why the views show them apart and they never share a name.
class CheckSkipped(Exception):
    """A skip that is not n/a (see the comment above): the check applies, and was not run, because ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def type_name(obj) -> str:
    """What a value is, in the framework's words (a handle names the object it stands for)."""
    return getattr(obj, "remote_type", None) or type(obj).__name__


def adapter_part(ctx, method: str, *args, failed):
    """One part of a check through an adapter method (one of its ``CheckSpec.needs``, so the adapter implements it):
    ``(result, None)``, or ``(None, NotApplicablePart)`` where the framework has no such mechanism for this part.
    Any other exception is the layer's: CheckFailed with ``failed(exc)``'s words (where it was raised is no
    evidence: the code under test shares the process and can forge any traceback, a NotImplementedError included)."""
    try:
        return getattr(ctx.adapter, method)(*args), None
    except NotApplicable as exc:
        return None, NotApplicablePart(exc.reason, exc.code)
    except Exception as exc:
        raise CheckFailed(failed(exc)) from exc


class CheckBlocked(Exception):
    """The check could not judge the layer because of a mistake another check names."""

    def __init__(self, by: str, reason: str, symptom: str = "", in_own_dtype: bool = False):
        super().__init__(f"not run: blocked by {by} ({reason})")
        self.message = f"not run: blocked by {by} ({reason})"
        self.by = by
        self.reason = reason
        self.symptom = symptom
        self.in_own_dtype = in_own_dtype  # ``by`` failed in the cases' own dtype, not in this check's


@dataclass
class CheckContext:
    """Everything a check needs about one (contract, implementation, framework, device)."""
    contract: Any
    adapter: RemoteAdapter         # every protocol's methods, answered by the layer's executor (typed replies)
    impl: Any                      # a handle to the user's class, factory or function in its executor
    impl_name: str
    device: str = "cpu"
    seed: int = 0
    state_map: dict = field(default_factory=dict)
    session: Any = None            # the executors the code under test runs in (``executor.Session``)
    notes: list = field(default_factory=list)  # what loading the implementation noted
    arg_map: dict = field(default_factory=dict)  # contract constructor argument -> the layer's own name
    compile_backend: str | None = None  # torch.compile's backend for ``compiled`` (None: aot_eager)
    dtype: str | None = None       # the dtype ``contract`` (a view) casts the inputs and state to; None: their own
    _own_initial: dict | None = field(default=None, repr=False)  # ``own_initial``'s, read once

    def constructor_args(self, extra: dict | None = None) -> dict:
        """The contract's constructor arguments (and ``extra``) under the layer's own names (--arg-map; those it
        maps to nothing left out): every process that builds the layer builds it from these."""
        from ..binding import mapped
        return mapped({**self.contract.constructor, **(extra or {})}, self.arg_map)

    def with_options(self, **options) -> "CheckContext":
        """This context with run options set (``compile_backend``)."""
        for k, v in options.items():
            setattr(self, k, v)
        return self

    @property
    def is_function(self) -> bool:
        return self.contract.kind == "function"

    # -- inputs ---------------------------------------------------------------------------
    def case_inputs(self, case) -> list[np.ndarray]:
        return list(inputs_mod.case_inputs(self.contract, case, self.seed).values())

    def first_inputs(self) -> list[np.ndarray]:
        return self.case_inputs(self.contract.cases[0])

    # -- building ----------------------------------------------------------------------
    def new_layer(self, state: dict | None = None, strict: bool = True):
        """A fresh, built layer (None for a function contract), optionally with slot values set."""
        if self.is_function:
            return None
        layer = self.adapter.construct(self.impl, self.constructor_args())
        layer = self.in_dtype(self.adapter.build(layer, self.build_inputs()))
        if state:
            mapping = self.slot_map(layer, strict=strict)
            for slot, value in state.items():
                if slot in mapping:
                    self.assign_slot(layer, mapping[slot], value)
        return layer

    def layer_at(self, state: dict):
        """(layer, the state it holds): a fresh layer with every slot of ``state`` that it registers set;
        a slot it does not register (an untracked attribute, or none) stays as the layer made it, taken
        to be the contract's initial value, and the reference is evaluated there. ``parameters`` or
        ``buffers`` name the registration mistake. The third item says what was left unset (or None)."""
        layer = self.new_layer()
        if layer is None or not state:
            return layer, dict(state or {}), None
        mapping = self.slot_map(layer)
        held = dict(state)
        unset = [slot for slot in state if slot not in mapping]
        for slot, value in state.items():
            if slot in mapping:
                self.assign_slot(layer, mapping[slot], value)
        if unset:
            init = inputs_mod.initial_state(self.contract)
            held.update({slot: init[slot] for slot in unset})
            return layer, held, (f"slot(s) {', '.join(map(repr, unset))} not in the layer's registered state, "
                                 f"so not set: compared with the reference at the initial value")
        return layer, held, None

    def seeded_layer(self):
        """A fresh, built layer after the framework's seed is set to this run's: what ``init: random`` slots are
        judged and read on (two such builds agree, or ``parameters`` fails)."""
        self.adapter.manual_seed(self.seed)
        return self.new_layer()

    def own_initial(self) -> dict[str, np.ndarray]:
        """The layer's own initial values of the slots of ``init: random`` it registers, read from a seeded build
        (once per context): the values every check sets and the reference is evaluated at."""
        if self._own_initial is None:
            slots = {**self.contract.trainable, **self.contract.non_trainable}
            random = [s for s, spec in slots.items() if spec.random is not None and spec.test_value is None]
            self._own_initial = {}
            if random and not self.is_function:
                layer = self.seeded_layer()
                state = {**self.adapter.non_trainable(layer), **self.adapter.trainable(layer)}
                mapping = self.slot_map(layer)
                own = {s: slot_value(mapping[s], np.asarray(self.adapter.numpy(state[mapping[s]])))
                       for s in random if s in mapping}
                # a slot of another shape than the contract's is parameters' finding: the reference never sees it
                self._own_initial = {s: v for s, v in own.items() if v.shape == self.contract.shape(slots[s].shape)}
        return self._own_initial

    def test_state(self) -> dict[str, np.ndarray]:
        """The state the checks set and compare at (``inputs.test_state``), a slot of ``init: random`` without a
        ``test_value`` at the layer's own initial value (``own_initial``)."""
        return {**inputs_mod.test_state(self.contract), **self.own_initial()}

    def build_inputs(self) -> list[np.ndarray]:
        """The first case's inputs in the cases' own dtype: a layer is built as the user builds it (a
        Keras or Gluon layer makes its weights on a first call), then cast (``in_dtype``)."""
        inputs = self.first_inputs()
        if self.dtype is None:
            return inputs
        own = np_dtype(self.contract.own_dtype)
        return [a.astype(own) if is_floating(a.dtype) else a for a in inputs]

    def in_dtype(self, layer):
        """The layer with its floating state in this context's dtype (as torch's ModuleInfo tests build a
        module per dtype); unchanged in the cases' own dtype."""
        if self.dtype is None or layer is None:
            return layer
        cast = self.adapter.to_dtype(layer, self.dtype)
        if cast is None:
            raise NotApplicable(f"{self.adapter.name} cannot cast this layer to {self.dtype}", code="no_cast")
        return cast

    def callable(self, layer):
        return self.adapter.as_callable(self.impl) if layer is None else layer

    def run(self, layer, inputs, training=False):
        return self.adapter.call(self.callable(layer), inputs, device=None, training=training)

    def output_numpy(self, out, what="output") -> np.ndarray:
        if not self.adapter.is_tensor(out):
            raise CheckFailed(f"{what} is a {type_name(out)}, not a {self.adapter.name} tensor")
        return self.adapter.numpy(out)

    def rebuilder(self, state: dict, like):
        """For ``adapter.move``: builds a fresh layer with ``state`` wherever the adapter calls it."""
        from ..boundary import Rebuild
        mapping = self.slot_map(like)
        return Rebuild(self.impl, self.constructor_args(), self.first_inputs(),
                       {str(mapping[s]): variable_value(mapping[s], v) for s, v in state.items() if s in mapping})

    def import_native(self, path: str):
        """A contract's native layer or function (``module.attr``), where the framework's own code runs:
        a separate executor that never imported the code under test."""
        return self.adapter.import_native(path)

    def fresh_adapter(self):
        """A context manager: the adapter of a new process that never imported the code under test
        (the export check loads saved layers there)."""
        return self.session.fresh_adapter(self.adapter.name)

    @property
    def impl_spec(self) -> str | None:
        """``module:attr`` of the implementation, for a fresh process to import; None when it has none."""
        return next((spec for (fw, spec), v in self.session.loaded.items()
                     if fw == self.adapter.name and v[1] is self.impl), None)

    # -- state slots ---------------------------------------------------------------------
    def slot_map(self, layer, strict=False) -> dict[str, str]:
        """Contract slot -> the framework's name for it.

        By --state-map (a name, or its dotted path: ``w1.kernel`` for ``w1/kernel``, with its chain of transforms:
        the name is then a ``state_map.Held``), then by name (exact, or the last dotted component), then by a
        unique shape. Unmatched slots are left out (strict=True raises CheckFailed instead).
        """
        state = {**self.adapter.non_trainable(layer), **self.adapter.trainable(layer)}
        shapes = {k: tuple(v.shape) for k, v in state.items()}
        slots = {**self.contract.trainable, **self.contract.non_trainable}
        out: dict[str, str] = {}
        for slot, spec in slots.items():
            if slot in self.state_map:
                named = held_variable(self.state_map[slot], shapes, f"--state-map {slot}")
                if named is not None:
                    out[slot] = named
                continue
            if slot in state:
                out[slot] = slot
                continue
            tail = [k for k in state if k.replace("/", ".").split(".")[-1].split(":")[0] == slot]
            if len(tail) == 1:
                out[slot] = tail[0]
                continue
            want = self.contract.shape(spec.shape)
            same = [k for k, s in shapes.items() if s == want and k not in out.values()]
            if len(same) == 1:
                out[slot] = same[0]
        if strict:
            from .mistakes import state_map_hint
            missing = [s for s in slots if s not in out]
            if missing:
                free = {k: shapes[k] for k in state if k not in out.values()}
                wants = {s: self.contract.shape(slots[s].shape) for s in missing}
                raise CheckFailed(f"cannot find state slot(s) {', '.join(map(repr, missing))} in the layer "
                                  f"(its state: {sorted(state) or 'empty'}); {state_map_hint(missing, free, wants)}")
        return out

    def assign_slot(self, layer, name, value):
        """Set the variable ``name`` (a slot map's) to a slot's ``value``, through its chain's inverse."""
        from ..state_map import variable_value
        self.adapter.assign(layer, str(name), variable_value(name, value))

    def tolerance(self, check: str, dtype: str):
        from ..tolerances import tolerance
        return tolerance(self.contract, check, dtype)

    def ulps(self, check: str, dtype: str) -> float:
        from ..tolerances import ulps
        return ulps(self.contract, check, dtype)

    def expected_dtype(self, inputs) -> str:
        want = self.contract.output_dtype
        if want:
            return want
        floats = [a for a in inputs if is_floating(a.dtype)]
        return str((floats or inputs)[0].dtype)


def held_variable(entry: str, shapes: dict, where: str):
    """The variable a state map entry (``path`` or ``path|chain``, ``state_map``) names among ``shapes`` ({name:
    shape}), as a ``Held`` where it has a chain; None where no one variable has that name. A dotted path names a
    variable a framework names by '/' too (w1.kernel: 'w1/kernel'). A chain that does not fit the variable's shape
    raises StateMapError (a usage error, not the layer's)."""
    path, steps = parse_held(entry)
    dotted = path.replace("/", ".")
    named = [k for k in shapes if k == path] or [k for k in shapes if k.replace("/", ".") == dotted]
    if len(named) != 1:
        return None
    if not steps:
        return named[0]
    try:
        held_shapes(steps, shapes[named[0]])
    except StateMapError as exc:
        raise StateMapError(f"{where}={entry}: {named[0]!r} has shape {list(shapes[named[0]])}, and {exc}") from None
    return Held(named[0], steps, shapes[named[0]])


from ..errors import unexpected_error  # noqa: E402,F401  (re-exported for the checks)
