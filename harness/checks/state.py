"""Registration of state: ``parameters`` (the trainable set) and ``buffers`` (non-trainable state)."""
from __future__ import annotations

import numpy as np

from ..dtypes import is_floating
from .. import inputs as inputs_mod
from ..dtypes import np_dtype
from .base import CheckBlocked, CheckFailed
from .common import untracked_for
from .mistakes import state_map_hint, Findings, hint
from ..state_map import chain_text, slot_value


def _shape_dtype_problems(ctx, slot, spec, value, name=None) -> list[str]:
    """``value``'s shape (through ``name``'s chain of transforms, where the state map gives one) and dtype against
    the slot's."""
    problems = []
    want_shape = ctx.contract.shape(spec.shape)
    shape = tuple(getattr(name, "slot_shape", None) or value.shape)
    if shape != want_shape:
        flip = ""
        if len(shape) > 1 and shape[::-1] == want_shape and name is not None:
            flip = f": the layer holds it with its axes reversed; use --state-map {slot}={str(name).replace('/', '.')}"
            flip += chain_text(getattr(name, "steps", ())) + "|T"
        problems.append(f"slot {slot!r} has shape {list(shape)}, expected {list(want_shape)}{flip}")
    got_dtype = ctx.adapter.dtype_name(value)
    if got_dtype != spec.dtype:
        problems.append(f"slot {slot!r} has dtype {got_dtype}, expected {spec.dtype}")
    return problems


def _values(a) -> str:
    """An array's values as the message shows them (elided past a few)."""
    return np.array2string(np.asarray(a), threshold=6, edgeitems=3)


NOT_FOUND = object()  # (a second build's value of a slot) the slot is not in it


def _random_problems(slot, spec, got, again) -> list[str]:
    """A slot of ``init: random``, judged by its bounds instead of a fixed value: finite (unless ``finite: false``),
    the same in two builds with the same seed (``again``: the second's values, NOT_FOUND where it lacks the slot,
    None where not compared), and the declared mean (within 5 standard errors over its elements) and std (within a
    factor that widens for few elements)."""
    bounds, values = spec.random, np.asarray(got).astype(np.float64)
    n, problems = values.size, []
    if bounds.finite and not np.isfinite(values).all():
        return [f"slot {slot!r} (init: random) holds {int((~np.isfinite(values)).sum())} non-finite value(s) "
                f"of {n}"]
    if again is NOT_FOUND:  # the second build lacks the slot: a build that does not repeat either
        problems.append(f"slot {slot!r} (init: random) is not found in a second build with the same seed: the layer "
                        f"registers its state differently from one build to the next")
    elif again is not None and not np.array_equal(np.asarray(got), np.asarray(again), equal_nan=True):
        differ = int((np.asarray(got) != np.asarray(again)).sum())
        problems.append(f"slot {slot!r} (init: random) differs between two builds with the same seed ({differ} of "
                        f"{n} values): its initial values come from a generator the framework's seed does not set "
                        f"(an unseeded numpy or Python generator, or the clock), so no run repeats it")
    if n == 0:
        return problems
    mean, sd = float(values.mean()), float(values.std())
    if bounds.mean is not None:
        allowed = 5 * (bounds.std if bounds.std is not None else sd) / np.sqrt(n)
        if abs(mean - bounds.mean) > allowed:
            problems.append(f"slot {slot!r} has mean {mean:.4g}, outside its bound init: random: mean "
                            f"{bounds.mean:g} ± {allowed:.3g} (5 standard errors over its {n} values)")
    if bounds.std is not None and n >= 2:
        factor = 1.5 + 5 / np.sqrt(2 * (n - 1))
        if not bounds.std / factor <= sd <= bounds.std * factor:
            problems.append(f"slot {slot!r} has standard deviation {sd:.4g}, outside its bound init: random: std "
                            f"{bounds.std:g} (within a factor {factor:.3g} over its {n} values)")
    return problems


def _second_build(ctx, state_of) -> dict:
    """{slot: value} of a second build with the same seed (``state_of``: the adapter's trainable or saved state),
    matched anew: a framework may name a rebuilt sublayer's variables otherwise (dense, then dense_1...)."""
    layer = ctx.seeded_layer()
    state = state_of(layer)
    return {slot: slot_value(name, np.asarray(state[name]) if isinstance(state[name], np.ndarray)
                             else ctx.adapter.numpy(state[name]))
            for slot, name in ctx.slot_map(layer).items() if name in state}


def _untracked_hint(adapter, untracked, loose, slot, shape) -> str:
    """How to register a trainable slot held as an untracked attribute: an item of a plain list or dict that is
    already the framework's parameter type needs the framework's container, where it has one (register_in_
    container); anything else, the framework's parameter (register_trainable)."""
    in_container = all(p.endswith("]") for p in loose)
    already = adapter.parameter_type and all(untracked[p].startswith(adapter.parameter_type + " ") for p in loose)
    return (in_container and already and hint("register_in_container", adapter.name)) or \
        hint("register_trainable", adapter.name, slot=slot, shape=tuple(shape))


def check_parameters(ctx):
    """The trainable set is exactly the contract's trainable slots, at their initial values."""
    adapter, contract = ctx.adapter, ctx.contract
    random = any(spec.random is not None for spec in contract.trainable.values())
    layer = ctx.seeded_layer() if random else ctx.new_layer()
    trainable = adapter.trainable(layer)
    untracked = adapter.untracked(layer)
    mapping = ctx.slot_map(layer)
    init = inputs_mod.initial_state(contract)
    again = _second_build(ctx, adapter.trainable) if random else {}
    problems = Findings()  # each hint once, however many slots show the mistake

    for slot, spec in contract.trainable.items():
        shape = contract.shape(spec.shape)
        name = mapping.get(slot)
        if name is None or name not in trainable:
            loose = untracked_for(untracked, slot, shape)
            if loose:
                problems.add(f"trainable slot {slot!r} is held as an untracked attribute "
                             f"{', '.join(map(repr, loose))} ({untracked[loose[0]]}): the framework does not "
                             f"see it, so no optimizer updates it", _untracked_hint(adapter, untracked, loose, slot,
                                                                                    shape))
            elif name is not None:
                problems.add(f"trainable slot {slot!r} is registered as non-trainable state ({name!r}): "
                             f"gradients skip it and no optimizer updates it", hint('make_trainable', adapter.name))
            else:
                problems.append(f"trainable slot {slot!r} (shape {list(shape)}) is missing from the trainable set "
                                f"{sorted(trainable) or '(empty)'}")
                # registered under a name that neither its own nor a unique shape tells: only the user can say
                free = {n: tuple(v.shape) for n, v in trainable.items() if n not in mapping.values()}
                if any(s == shape or (len(s) > 1 and s[::-1] == shape) for s in free.values()):
                    problems.say(f"if one of the trainable names holds a slot the contract names, "
                                 f"{state_map_hint([slot], free, {slot: shape})}")
            continue
        value = trainable[name]
        problems += _shape_dtype_problems(ctx, slot, spec, value, name)
        if not problems and spec.random is not None:
            problems += _random_problems(slot, spec, slot_value(name, adapter.numpy(value)),
                                         again.get(slot, NOT_FOUND))
        elif not problems:
            got = slot_value(name, adapter.numpy(value))
            if not np.array_equal(got, init[slot]):
                problems.append(f"trainable slot {slot!r} starts at {_values(got)}, expected {_values(init[slot])} "
                                f"(init: {contract.trainable[slot].init!r})")
        if all(id(value) != id(v) for v in adapter.optimizer_view(layer)):
            problems.append(f"trainable slot {slot!r} is not in the optimizer's view of the layer")

    # a non-trainable slot registered wrongly is ``buffers``' to name (where it runs): here it blocks
    buffers_run = bool(contract.non_trainable) and not contract.skip_reason("buffers")
    theirs = []
    matched = {mapping[s] for s in contract.trainable if s in mapping}
    for name in sorted(set(trainable) - matched):
        nt_slot = next((s for s in contract.non_trainable if mapping.get(s) == name), None)
        if nt_slot and buffers_run:
            theirs.append(f"{nt_slot!r} is registered as trainable")
        elif nt_slot:
            problems.add(f"non-trainable slot {nt_slot!r} is registered as trainable ({name!r}): "
                         f"{hint('counted_as_trainable', adapter.name)}", hint('register_buffer', adapter.name))
        else:
            problems.append(f"unexpected trainable state {name!r} (shape {list(trainable[name].shape)}) "
                            f"that the contract does not declare")
    nt_loose = set()
    if buffers_run:
        for slot, spec in contract.non_trainable.items():
            if mapping.get(slot) not in {**trainable, **adapter.non_trainable(layer)}:
                nt_loose.update(untracked_for(untracked, slot, contract.shape(spec.shape)))
    for path, what in untracked.items():
        if path in nt_loose:
            continue
        if not any(path in p for p in problems):
            problems.append(f"untracked tensor attribute {path!r} ({what}): invisible to the framework's "
                            f"parameter, device and serialization machinery")
    if problems:
        raise CheckFailed(problems.text())
    if theirs:
        raise CheckBlocked("buffers", "; ".join(theirs),
                           f"the trainable set holds {', '.join(theirs)} (a non-trainable slot of the contract)")


def check_buffers(ctx):
    """Non-trainable slots are in the layer's saved state, never trainable, and get no gradient."""
    adapter, contract = ctx.adapter, ctx.contract  # applicable: a contract with non-trainable state
    random = any(spec.random is not None for spec in contract.non_trainable.values())
    layer = ctx.seeded_layer() if random else ctx.new_layer()
    again = _second_build(ctx, adapter.serialized_state) if random else {}
    trainable, non_trainable = adapter.trainable(layer), adapter.non_trainable(layer)
    untracked = adapter.untracked(layer)
    mapping = ctx.slot_map(layer)
    saved = adapter.serialized_state(layer)
    init = inputs_mod.initial_state(contract)
    problems = Findings()  # each hint once, however many slots show the mistake
    present = []
    for slot, spec in contract.non_trainable.items():
        shape = contract.shape(spec.shape)
        name = mapping.get(slot)
        if name in trainable:
            problems.add(f"non-trainable slot {slot!r} is registered as trainable ({name!r}): "
                         f"{hint('counted_as_trainable', adapter.name)}", hint('register_buffer', adapter.name))
            continue
        if name not in non_trainable:
            loose = untracked_for(untracked, slot, shape)
            where = (f"held as a plain attribute {', '.join(map(repr, loose))} ({untracked[loose[0]]})"
                     if loose else "missing from the layer's state")
            problems.add(f"non-trainable slot {slot!r} is {where}: device moves and serialization skip it",
                         hint('register_buffer', adapter.name))
            continue
        present.append((slot, name))
        problems += _shape_dtype_problems(ctx, slot, spec, non_trainable[name], name)
        if name not in saved:
            why = hint("not_persistent", adapter.name)
            problems.append(f"non-trainable slot {slot!r} ({name!r}) is not in the saved state"
                            + (f": {why}" if why else ""))
        elif spec.random is not None:
            problems += _random_problems(slot, spec, slot_value(name, saved[name]), again.get(slot, NOT_FOUND))
        elif not np.array_equal(held := slot_value(name, np.asarray(saved[name]).astype(np_dtype(spec.dtype))),
                                init[slot]):
            problems.append(f"non-trainable slot {slot!r} does not hold its initial value: it starts at "
                            f"{_values(held)}, expected {_values(init[slot])} (init: {spec.init!r})")
    if present and not ctx.is_function:
        # no gradient may reach non-trainable state
        inputs = ctx.first_inputs()
        out = ctx.run(layer, inputs)
        ct = np.ones(ctx.output_numpy(out).shape)
        state_grads = adapter.vjp(layer, layer, inputs, [i for i, a in enumerate(inputs) if is_floating(a.dtype)],
                                  ct).state
        for slot, name in present:
            if state_grads.get(name) is not None:
                problems.append(f"a gradient reached non-trainable slot {slot!r} ({name!r})")
    if problems:
        raise CheckFailed(problems.text())
