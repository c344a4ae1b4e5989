"""A contract's ``reference: {impl: module:attr, framework: ...}``: a trusted layer or function in a supported framework,
run through the same adapter machinery as a layer under test, in an executor of its own (``Session.reference_impl``),
in float64 (JAX under its local x64 switch). Its VJP is that framework's autodiff; a surrogate rule is whatever
custom gradient the trusted implementation defines (declared as ``gradients: {mode: surrogate}``, as for a numpy
reference).

Before each call the state the layer under test holds (``ctx.test_state()``, its own initial values for ``init:
random`` slots included) is copied into the reference through the reference's own ``state_map`` (the Part A
transforms); both sides are addressed by the contract's slots. What goes wrong on the reference's side (it cannot be
imported or built, its state map does not fit, it raises) is the contract's problem (``ReferenceProblem``, origin
"reference"), never the layer's failure.

Judge side: no framework is imported here.
"""
from __future__ import annotations

import numpy as np

from .dtypes import is_floating


class ReferenceProblem(Exception):
    """The contract's ``reference: {impl}`` cannot be run: a contract problem, not the layer's."""
    origin = "reference"


def _float64(inputs) -> list:
    return [np.asarray(a, dtype=np.float64) if is_floating(np.asarray(a).dtype) else np.asarray(a) for a in inputs]


def reference_context(ctx):
    """A CheckContext for the reference side of ``ctx``: the reference's adapter and handle, its state map."""
    from .checks.base import CheckContext
    ref = ctx.contract.reference
    try:
        adapter, impl = ctx.session.reference_impl(ref.framework, ref.impl)
    except Exception as exc:   # LoadFailed, and an executor that cannot start (the framework is missing)
        raise ReferenceProblem(str(exc)) from None
    # built as in the cases' own dtype (a build that calls the layer calls it in the dtype it holds), then cast
    own = ctx.contract.viewed.for_dtype(None) if getattr(ctx.contract, "viewed", None) is not None else ctx.contract
    return CheckContext(own, adapter, impl, ref.impl, seed=ctx.seed, session=ctx.session,
                        state_map=_pairs(ref.state_map))


def _pairs(entries) -> dict:
    """The reference's ``state_map`` entries (``slot=path`` with a chain, checked when the contract was read) as
    {slot: path}."""
    from .state_map import split_items
    pairs = [pair.split("=", 1) for entry in entries for pair in split_items(str(entry))]
    return {slot.strip(): name.strip() for slot, name in pairs}


def _layer(rctx, state: dict):
    """The reference layer, built as a layer is and cast to float64, with the slots of ``state`` set through its
    state map (None: a function)."""
    from .checks.base import CheckFailed
    layer = rctx.new_layer()
    if layer is None:
        return None
    layer = rctx.adapter.to_dtype(layer, "float64")
    if layer is None:
        raise ReferenceProblem(f"the contract's reference {rctx.impl_name} ({rctx.adapter.name}) cannot be cast to "
                               f"float64 here")
    try:
        mapping = rctx.slot_map(layer, strict=True)
    except CheckFailed as exc:   # a slot its state map does not find
        raise ReferenceProblem(f"the contract's reference {rctx.impl_name}: {_as_yaml(exc.message)}") from None
    for slot, value in state.items():
        if slot in mapping:
            rctx.assign_slot(layer, mapping[slot], np.asarray(value, dtype=np.float64)
                             if is_floating(np.asarray(value).dtype) else value)
    return layer


def _as_yaml(message: str) -> str:
    """The state-map hint said for the reference, whose map is the contract's ``reference.state_map``, not an
    option: "use --state-map a=x --state-map b=y" -> 'add to reference.state_map: ["a=x", "b=y"]'."""
    import re
    hint = re.search(r"use ((?:--state-map \S+ ?)+)", message)
    if hint is None:
        return f"{message} (in `reference: {{state_map}}`)"
    entries = ", ".join(f'"{e}"' for e in re.findall(r"--state-map (\S+)", hint.group(1)))
    return message[:hint.start()] + f"add to the contract's reference.state_map: [{entries}]" + \
        message[hint.end():].rstrip()


def _called(what: str, rctx, fn, *args):
    from .boundary import RemoteError
    from .state_map import StateMapError
    try:
        return fn(*args)
    except (RemoteError, StateMapError) as exc:
        text = getattr(exc, "remote_text", None) or str(exc)
        raise ReferenceProblem(f"the contract's reference {rctx.impl_name} "
                               f"({rctx.adapter.name}) raised in {what}: {text}") from None


def forward(ctx, inputs, state) -> np.ndarray:
    """The reference's output in float64 on ``inputs`` at ``state`` (the slots the layer holds)."""
    rctx = reference_context(ctx)
    layer = _called("building it", rctx, _layer, rctx, state)
    out = _called("its forward", rctx, rctx.run, layer, _float64(inputs))
    return np.asarray(rctx.adapter.numpy(out), dtype=np.float64)


def vjp(ctx, cotangent, inputs, state) -> dict:
    """{input or trainable slot name: gradient} of sum(forward * cotangent), by the reference framework's autodiff,
    every floating input differentiated."""
    rctx = reference_context(ctx)
    layer = _called("building it", rctx, _layer, rctx, state)
    args = _float64(inputs)
    idx = [i for i, a in enumerate(args) if is_floating(a.dtype)]
    names = list(ctx.contract.cases[0].inputs)
    got = _called("its backward", rctx, rctx.adapter.vjp, rctx.callable(layer), layer, args, idx,
                  np.asarray(cotangent, dtype=np.float64))
    grads, state_grads = got.inputs, got.state
    out = {names[i]: np.asarray(rctx.adapter.numpy(grads[i])) if grads[i] is not None else np.zeros_like(args[i])
           for i in idx}
    if layer is not None:
        from .state_map import slot_value
        mapping = rctx.slot_map(layer)
        for slot in ctx.contract.trainable:
            g = state_grads.get(mapping.get(slot)) if slot in mapping else None
            if g is not None:
                out[slot] = slot_value(mapping[slot], np.asarray(rctx.adapter.numpy(g)))
    return out


def label(contract) -> str:
    """``reference other:Original (torch)``: how a message names an implementation reference."""
    return f"reference {contract.reference.label}"
