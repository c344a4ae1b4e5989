"""Helpers that several checks share: the reference's forward value, the framework's own layer or
function that a contract names, the untracked attributes that look like a slot. Checks import these from here, never from one another."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ..dtypes import is_floating
from ..reference_run import reference
from .base import CheckFailed


def reference_forward(ctx, inputs, state):
    """The reference's output in float64 for the case's inputs, at ``state``."""
    if ctx.contract.reference.impl:
        from .. import impl_reference
        return impl_reference.forward(ctx, inputs, state)
    _, forward, _ = reference(ctx.contract)
    return np.asarray(forward(*[np.asarray(a, dtype=np.float64) if is_floating(a.dtype) else a
                                for a in inputs], **{**ctx.contract.constructor, **state}))  # a slot may share a flag's name (bias)


def reference_vjp(ctx, ref_vjp, cotangent, inputs, state) -> dict:
    """The reference VJP ``ref_vjp`` (``reference(contract)``'s third) of ``cotangent`` at the case's inputs in
    float64, at ``state``: {input or slot name: its gradient}."""
    if ctx.contract.reference.impl:
        from .. import impl_reference
        return impl_reference.vjp(ctx, cotangent, inputs, state)
    return ref_vjp(cotangent, *[np.asarray(a, dtype=np.float64) if is_floating(a.dtype) else a for a in inputs],
                   **{**ctx.contract.constructor, **state})


def import_native(ctx, path: str):
    """The native class or function ``path`` the contract names for this framework. Whether it exists
    depends on the framework installed where the layer runs, so this one rule is decided here."""
    try:
        return ctx.import_native(path)
    except Exception as exc:  # in the native executor: RemoteError; in-process: ImportError, AttributeError
        native = ctx.contract.native.get(ctx.adapter.name)
        where = ctx.contract.location("native", ctx.adapter.name, native.key if native else "class")
        raise CheckFailed(f"the contract's native layer {path!r} does not exist ({where}): "
                          f"{exc}") from None


class NativeProblem(Exception):
    """The contract's native layer raised where its ``native.<fw>`` entry builds or calls it (an argument or keyword
    it does not take, an input too few): the contract's problem, never the layer's (the runner says so)."""
    origin = "native"


@contextmanager
def _native_raises(ctx, spec, doing: str):
    """What the native executor raises in the block, as a NativeProblem naming the contract's entry."""
    try:
        yield
    except Exception as exc:
        # boundary.RemoteError from the native executor only; a package it lacks stays the environment's problem
        if getattr(exc, "origin", None) != "native" or getattr(exc, "missing_dependency", None):
            raise
        where = ctx.contract.location("native", ctx.adapter.name)
        raise NativeProblem(f"the contract's native layer {spec.class_path} ({where}: native.{ctx.adapter.name}) "
                            f"raised {doing}: {getattr(exc, 'remote_text', exc)}") from None


def native_layer(ctx, spec):
    """The contract's native layer (``spec``: its ``native.<fw>`` class entry), built by a first call as
    ``spec.call`` says (on the first case's inputs, as the layer is), in ``ctx``'s dtype."""
    cls = import_native(ctx, spec.class_path)
    args = {k: ctx.contract.resolve_arg(v) for k, v in spec.args.items()}
    names = list(ctx.contract.cases[0].inputs)
    with _native_raises(ctx, spec, "when built with its args and called as its call says"):
        built = ctx.adapter.build(ctx.adapter.construct_native(cls, args),
                                  spec.call.arguments(names, ctx.build_inputs()), kwargs=native_kwargs(ctx, spec))
    return ctx.in_dtype(built)


def native_kwargs(ctx, spec) -> dict | None:
    """``native.<fw>.call.kwargs`` with each ``$name`` resolved; None where there are none."""
    return {k: ctx.contract.resolve_arg(v) for k, v in spec.call.kwargs.items()} or None


def call_native(ctx, native, spec, case, inputs):
    """The native layer's output on ``case``'s ``inputs`` (the layer's, in the case's order), called as
    ``native.<fw>.call`` says: its inputs in the native's positional order, its keywords."""
    with _native_raises(ctx, spec, f"on case {case.name!r}, called as its call says"):
        return ctx.adapter.call(native, spec.call.arguments(list(case.inputs), inputs),
                                kwargs=native_kwargs(ctx, spec))


def set_native_state(ctx, native, spec, state: dict):
    """The contract's native layer at ``state``: each slot through ``spec.state`` (the contract's ``native.<fw>.
    state``, a state map: ``gain: weight``, or with transforms, ``w: weight|T``). A name the native layer lacks
    fails the check (the framework installed decides it); a chain that does not fit is a StateMapError."""
    from .base import held_variable
    variables = {**ctx.adapter.trainable(native), **ctx.adapter.non_trainable(native)}
    shapes = {k: tuple(v.shape) for k, v in variables.items()}
    where = f"native.{ctx.adapter.name}.state"
    for slot, entry in spec.state.items():
        name = held_variable(entry, shapes, f"{where}: {slot}")
        if name is None:
            raise CheckFailed(f"native {spec.class_path} has no state {entry.split('|')[0]!r} for slot {slot!r} "
                              f"(it has {sorted(variables)})")
        ctx.assign_slot(native, name, state[slot])


def untracked_for(untracked: dict, slot: str, shape) -> list[str]:
    """Untracked attributes that look like ``slot``: same name first, else same shape."""
    by_name = [p for p in untracked if p.split(".")[-1].split("[")[0] == slot]
    if by_name:
        return by_name
    return [p for p, what in untracked.items() if what.endswith(str(list(shape)))]


def batch_of(inputs, axis):
    """(which inputs carry the batch axis, its size) or (None, why not)."""
    batched = [a.ndim > axis for a in inputs]
    sizes = {a.shape[axis] for a, b in zip(inputs, batched) if b}
    if not sizes:
        return None, f"no input has an axis {axis}"
    if len(sizes) > 1:
        return None, f"the inputs' sizes along axis {axis} differ ({sorted(sizes)})"
    n = sizes.pop()
    if n < 2:
        return None, f"a batch of {n} along axis {axis}"
    return batched, n
