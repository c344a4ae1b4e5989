"""Seeded input generation from a contract's case descriptions (float64 numpy)."""
from __future__ import annotations

import zlib

import numpy as np

from .dtypes import np_dtype
from .reference_run import reference


def rng_for(seed: int, *names: str) -> np.random.Generator:
    # One stream per (seed, contract, case, input): adding a case never changes another's data.
    key = zlib.crc32("/".join(names).encode())
    return np.random.default_rng([seed, key])


def _draw(rng, spec, shape: tuple) -> np.ndarray:
    """``spec``: a ``contract.Draw`` (an input, or one of its rows)."""
    kind = spec.draw
    if kind == "normal":
        return spec.scale * rng.standard_normal(shape)
    if kind == "uniform":
        return rng.uniform(spec.low, spec.high, shape)
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "ones":
        return np.ones(shape)
    if kind == "literal":
        return np.broadcast_to(np.asarray(spec.value, dtype=np.float64), shape).copy()
    raise ValueError(f"unknown draw {kind!r}")


def make_input(contract, case_name: str, name: str, spec, seed: int) -> np.ndarray:
    """The input named ``name`` of a case (``spec``: a ``contract.InputSpec``), in float64 before casting to its
    dtype."""
    if spec.literal:
        value = np.asarray(spec.value)
        return value.astype(np_dtype(spec.dtype)) if spec.dtype != "bool" else value.astype(bool)
    shape = contract.shape(spec.shape)
    rng = rng_for(seed, contract.name, case_name, name)
    if spec.rows is not None:
        out = np.stack([_draw(rng, row, shape[1:]) for row in spec.rows])
    else:
        out = _draw(rng, spec, shape)
    if spec.dtype == "bool":
        return out > 0
    # Drawn in float64, rounded through the declared dtype (bfloat16: ml_dtypes') so that the reference
    # sees exactly what the layer sees.
    return out.astype(np_dtype(spec.dtype))


def case_inputs(contract, case, seed: int) -> dict[str, np.ndarray]:
    """``case``: a ``contract.Case``."""
    return {name: make_input(contract, case.name, name, spec, seed)
            for name, spec in case.inputs.items()}


def slot_value(contract, slot, rule) -> np.ndarray:
    """Value of a state slot (a ``contract.Slot``) under an ``init`` / ``test_value`` rule."""
    shape = contract.shape(slot.shape)
    dtype = slot.dtype
    dtype = np_dtype(dtype) if dtype != "bool" else bool
    if rule == "ones":
        return np.ones(shape, dtype=dtype)
    if rule == "zeros":
        return np.zeros(shape, dtype=dtype)
    if isinstance(rule, dict) and "linspace" in rule:
        lo, hi = rule["linspace"]
        n = int(np.prod(shape)) if shape else 1
        return np.linspace(lo, hi, n).reshape(shape).astype(dtype)
    raise ValueError(f"rule {rule!r} needs the reference")


def stand_in(contract, name: str, slot) -> np.ndarray:
    """A seeded draw for a slot of ``init: random`` where no layer is at hand (the reference checked against
    itself at load): normal, at the declared mean and std (defaults 0 and 1/sqrt(the last dimension)). The checks
    use the layer's own initial values instead (``CheckContext.test_state``)."""
    shape = contract.shape(slot.shape)
    bounds = slot.random
    std = bounds.std if bounds.std is not None else 1 / np.sqrt(max(shape[-1] if shape else 1, 1))
    drawn = (bounds.mean or 0.0) + std * rng_for(0, contract.name, "state", name).standard_normal(shape)
    return drawn.astype(np_dtype(slot.dtype) if slot.dtype != "bool" else bool)


def initial_state(contract) -> dict[str, np.ndarray]:
    """Every slot's initial value, from the rule or from the reference's ``init_<slot>`` (a slot of ``init:
    random``: a seeded stand-in, ``stand_in``)."""
    mod, _, _ = reference(contract)
    out = {}
    for name, slot in {**contract.trainable, **contract.non_trainable}.items():
        if slot.random is not None:
            out[name] = stand_in(contract, name, slot)
        elif slot.init == "reference":
            out[name] = np.asarray(getattr(mod, f"init_{name}")(**contract.constructor)).astype(
                np_dtype(slot.dtype) if slot.dtype != "bool" else bool)
        else:
            out[name] = slot_value(contract, slot, slot.init)
    return out


def test_state(contract) -> dict[str, np.ndarray]:
    """Nondefault values used by the values check (falls back to the initial value)."""
    init = initial_state(contract)
    out = {}
    for name, slot in {**contract.trainable, **contract.non_trainable}.items():
        rule = slot.test_value
        out[name] = init[name] if rule in (None, "reference") or rule == slot.init else slot_value(contract, slot, rule)
    return out
