"""What every check shares: outcomes, the per-target context, slot matching."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import inputs as inputs_mod


class CheckFailed(AssertionError):
    """The implementation broke the contract. ``details`` go to the results file."""

    def __init__(self, message: str, **details):
        super().__init__(message)
        self.message = message
        self.details = details


class CheckSkipped(Exception):
    def __init__(self, reason: str, not_applicable: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.not_applicable = not_applicable


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


@dataclass
class CheckContext:
    """Everything a check needs about one (contract, implementation, framework, device)."""
    contract: Any
    adapter: Any
    impl: Any                      # the user's class, factory or function
    impl_name: str
    device: str = "cpu"
    seed: int = 0
    state_map: dict = field(default_factory=dict)

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
        layer = self.adapter.construct(self.impl, self.contract.constructor)
        layer = self.adapter.build(layer, self.first_inputs())
        if state:
            mapping = self.slot_map(layer, strict=strict)
            for slot, value in state.items():
                if slot in mapping:
                    self.adapter.assign(layer, mapping[slot], value)
        return layer

    def callable(self, layer):
        return self.adapter.as_callable(self.impl) if layer is None else layer

    def run(self, layer, inputs, training=False):
        return self.adapter.call(self.callable(layer), inputs, device=None, training=training)

    def output_numpy(self, out, what="output") -> np.ndarray:
        if not self.adapter.is_tensor(out):
            raise CheckFailed(f"{what} is a {type(out).__name__}, not a {self.adapter.name} tensor")
        return self.adapter.numpy(out)

    # -- state slots ---------------------------------------------------------------------
    def slot_map(self, layer, strict=False) -> dict[str, str]:
        """Contract slot -> the framework's name for it.

        By --state-map, then by name (exact, or the last dotted component), then by a unique
        shape. Unmatched slots are left out (strict=True raises CheckFailed instead).
        """
        state = {**self.adapter.non_trainable(layer), **self.adapter.trainable(layer)}
        shapes = {k: tuple(v.shape) for k, v in state.items()}
        slots = {**self.contract.trainable, **self.contract.non_trainable}
        out: dict[str, str] = {}
        for slot, spec in slots.items():
            if slot in self.state_map:
                if self.state_map[slot] in state:
                    out[slot] = self.state_map[slot]
                continue
            if slot in state:
                out[slot] = slot
                continue
            tail = [k for k in state if k.replace("/", ".").split(".")[-1].split(":")[0] == slot]
            if len(tail) == 1:
                out[slot] = tail[0]
                continue
            want = self.contract.shape(spec["shape"])
            same = [k for k, s in shapes.items() if s == want and k not in out.values()]
            if len(same) == 1:
                out[slot] = same[0]
        if strict:
            missing = [s for s in slots if s not in out]
            if missing:
                raise CheckFailed(f"cannot find state slot(s) {', '.join(map(repr, missing))} in the layer "
                                  f"(its state: {sorted(state) or 'empty'}); use --state-map SLOT=NAME")
        return out

    def tolerance(self, check: str, dtype: str):
        from ..compare import tolerance
        return tolerance(self.contract, check, dtype)

    def expected_dtype(self, inputs) -> str:
        want = self.contract.data.get("output_dtype")
        if want:
            return want
        floats = [a for a in inputs if np.issubdtype(a.dtype, np.floating)]
        return str((floats or inputs)[0].dtype)


def unexpected_error(exc: BaseException) -> str:
    """'TypeError: msg (at file.py:12 in forward)' with the deepest frame outside the harness."""
    import os
    import traceback
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(here)
            and "site-packages" not in f.filename and "/lib/python" not in f.filename]
    point = (user or frames or [None])[-1]
    where = f" (at {point.filename}:{point.lineno} in {point.name})" if point else ""
    import re
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # terminal colour codes (Keras bolds its messages)
    return f"{type(exc).__name__}: {text}{where}"
