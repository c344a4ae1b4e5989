"""The layer behaves like a built-in: ``composition``, ``serialization``, ``devices``."""
from __future__ import annotations

import numpy as np

from ..dtypes import is_floating, is_inexact
from ..compare import describe_mismatch, max_abs_error
from .base import CheckFailed, CheckSkipped, type_name, unexpected_error


def check_composition(ctx):
    """Inside the framework's Sequential between two built-in layers: runs, and its state is seen."""
    reason = ctx.contract.composition.skip
    if reason:
        raise CheckSkipped(reason)
    adapter = ctx.adapter
    # a Sequential feeds a batch: prefer a case with a batch axis (Keras's Dense rejects 1-D input)
    batched = [ctx.case_inputs(c) for c in ctx.contract.cases]
    inputs = next((b for b in batched if all(np.ndim(a) >= 2 for a in b)), ctx.first_inputs())
    if len(inputs) != 1:
        raise CheckSkipped("a Sequential passes one input; this layer takes several")
    width = ctx.contract.composition.in_features or inputs[0].shape[-1]
    layer = ctx.new_layer()
    container = adapter.sequential(layer, int(width))
    x = inputs[0].astype(np.float32) if not is_floating(inputs[0].dtype) else inputs[0]
    try:
        out = adapter.call(container, [x])
    except Exception as exc:
        raise CheckFailed(f"the layer fails inside a Sequential: {unexpected_error(exc)}") from exc
    y = ctx.output_numpy(out, "the Sequential's output")
    if y.shape[-1] != 2:
        raise CheckFailed(f"the Sequential's output has shape {list(y.shape)}; the last layer gives width 2")
    own = adapter.trainable(layer)
    seen = {id(v) for v in adapter.trainable(container).values()}
    lost = [n for n, v in own.items() if id(v) not in seen]
    if lost:
        raise CheckFailed(f"the container's trainable set does not include the layer's {lost}")
    untracked = adapter.untracked(layer)
    if untracked:
        raise CheckFailed(f"the layer holds untracked state {sorted(untracked)} that the container cannot see")


def check_serialization(ctx):
    """The framework's normal state round trip into a fresh instance gives bit-equal outputs."""
    adapter, contract = ctx.adapter, ctx.contract
    layer, _, _ = ctx.layer_at(ctx.test_state())
    mapping = ctx.slot_map(layer)
    saved = adapter.serialized_state(layer)
    problems = []
    for slot in {**contract.trainable, **contract.non_trainable}:
        name = mapping.get(slot)
        if name is None or name not in saved:
            problems.append(f"slot {slot!r} is missing from the saved state (saved: {sorted(saved) or 'nothing'})")
    fresh = ctx.new_layer()
    try:
        loaded = adapter.round_trip(layer, fresh)
    except Exception as exc:
        raise CheckFailed("; ".join(problems + [f"loading the saved state into a fresh instance failed: "
                                                 f"{unexpected_error(exc)}"])) from exc
    for case in contract.cases:
        inputs = ctx.case_inputs(case)
        a = ctx.output_numpy(ctx.run(layer, inputs))
        b = ctx.output_numpy(ctx.run(loaded, inputs), "the reloaded layer's output")
        same = a.shape == b.shape and np.array_equal(a, b, equal_nan=is_inexact(a.dtype))
        if not same:
            diff = describe_mismatch(b, a, 0.0, 0.0, what="outputs after the round trip")
            problems.append(f"case {case.name!r}: the reloaded layer is not bit-equal to the original: {diff}")
            break
    if problems:
        raise CheckFailed("; ".join(problems))


def check_devices(ctx):
    """The layer moves with the framework's normal call, every slot with it, and runs there."""
    adapter, contract = ctx.adapter, ctx.contract
    targets = _second_devices(ctx)
    if not targets:
        raise CheckSkipped(f"{adapter.name} offers no second device here")
    inputs = ctx.first_inputs()
    state = ctx.test_state()
    reference = ctx.output_numpy(ctx.run(ctx.new_layer(state, strict=False), inputs))
    problems, visited = [], []
    for device in targets:
        layer = ctx.new_layer(state, strict=False)
        try:
            moved = adapter.move(layer, device, rebuild=ctx.rebuilder(state, layer)) \
                if layer is not None else None
        except Exception as exc:
            problems.append(f"moving to {device} failed: {unexpected_error(exc)}")
            continue
        if moved is not None:
            state = {**adapter.non_trainable(moved), **adapter.trainable(moved)}
            stayed = {n: adapter.device_of(v) for n, v in state.items() if adapter.device_of(v) != device}
            if stayed:
                problems.append(f"after moving to {device}, state stayed behind: "
                                + ", ".join(f"{n!r} on {d}" for n, d in sorted(stayed.items())))
            for path, what in adapter.untracked(moved).items():
                problems.append(f"after moving to {device}, untracked attribute {path!r} ({what}) was not moved")
        args = [adapter.tensor(a, device) for a in inputs]
        try:
            out = adapter.call(ctx.callable(moved), args, device=device)
        except Exception as exc:
            problems.append(f"forward on {device} raised {unexpected_error(exc)}")
            continue
        if not adapter.is_tensor(out):
            problems.append(f"forward on {device} returned a {type_name(out)}")
            continue
        if adapter.device_of(out) != device:
            problems.append(f"forward on {device} put its output on {adapter.device_of(out)}")
            continue
        visited.append(device)
        if not adapter.is_virtual(device):
            rtol, atol = ctx.tolerance("devices", str(reference.dtype))
            diff = describe_mismatch(adapter.numpy(out), reference, rtol, atol, what=f"output on {device} vs cpu")
            if diff:
                problems.append(diff)
    if problems:
        raise CheckFailed("; ".join(problems))
    return {"devices": visited}


def _second_devices(ctx) -> list[str]:
    """Where ``devices`` and ``device_parity`` move the layer in this column."""
    adapter = ctx.adapter
    if ctx.device == "cuda":
        return [adapter.gpu_device]
    return [d for d in adapter.devices() if d not in (adapter.cpu_device, adapter.gpu_device)]


def check_device_parity(ctx):
    """Outputs and gradients computed on each real second device agree with cpu within the contract's
    ``device_parity`` tolerance (GPU matmuls may use TF32: a contract states the tolerance it accepts)."""
    adapter, contract = ctx.adapter, ctx.contract
    targets = [d for d in _second_devices(ctx) if not adapter.is_virtual(d)]
    if not targets:
        raise CheckSkipped(f"{adapter.name} has no second device with values here "
                           f"({', '.join(_second_devices(ctx)) or 'none'} only)")
    state = ctx.test_state()
    case = contract.cases[0]
    inputs = ctx.case_inputs(case)
    idx = [i for i, (n, s) in enumerate(case.inputs.items())
           if s.dtype.startswith("float") and s.differentiable]
    layer = ctx.new_layer(state, strict=False)
    grads = adapter.vjp(ctx.callable(layer), layer, inputs, idx, np.ones(ctx.output_numpy(ctx.run(layer, inputs)).shape))
    base = {"output": adapter.numpy(grads.output)}
    base.update({f"gradient of input {i}": adapter.numpy(grads.inputs[i])
                 for i in idx if grads.inputs[i] is not None})
    base.update({f"gradient of {k}": adapter.numpy(g) for k, g in grads.state.items() if g is not None})
    problems, worst = [], 0.0
    for device in targets:
        moved = ctx.new_layer(state, strict=False)
        if moved is not None:
            moved = adapter.move(moved, device, rebuild=ctx.rebuilder(state, moved))
        args = [adapter.tensor(a, device) for a in inputs]
        try:
            grads = adapter.vjp(ctx.callable(moved), moved, args, idx, np.ones(base["output"].shape))
        except Exception as exc:
            problems.append(f"differentiating on {device} raised {unexpected_error(exc)}")
            continue
        got = {"output": adapter.numpy(grads.output)}
        got.update({f"gradient of input {i}": adapter.numpy(grads.inputs[i])
                    for i in idx if grads.inputs[i] is not None})
        got.update({f"gradient of {k}": adapter.numpy(g) for k, g in grads.state.items() if g is not None})
        for what, want in base.items():
            if what not in got:
                problems.append(f"on {device}: no {what} (it exists on cpu)")
                continue
            rtol, atol = ctx.tolerance("device_parity", str(want.dtype))
            diff = describe_mismatch(got[what], want, rtol, atol, what=f"{what} on {device} vs cpu")
            if got[what].shape == want.shape and is_inexact(want.dtype):
                worst = max(worst, max_abs_error(got[what], want))
            if diff:
                problems.append(diff)
    if problems:
        raise CheckFailed("; ".join(problems), max_abs_error=worst)
    return {"devices": targets, "max_abs_error": worst}
