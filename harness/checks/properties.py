"""Properties the source documents verify, stated in the contract as data: ``properties``.

Each kind is implemented once. Properties run on a freshly constructed layer (its initial
state), since that is what the documents check (RMSNorm with gain one).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from ..contract import InputSpec
from ..tolerances import finfo
from .base import CheckFailed


def _input(ctx, prop, i, name="input", shape=None):
    spec = prop.input or InputSpec(dtype="float32")
    if shape is not None:
        spec = replace(spec, shape=tuple(shape))
    return inputs_mod.make_input(ctx.contract, f"properties/{i}", name, spec, ctx.seed)


def _mean_zero(ctx, prop, i):
    """The output's mean is zero to roundoff: |mean| <= ulps * eps(dtype) * the largest magnitude
    seen (input or output), alone or as the last layer of a Sequential after a dense layer."""
    x = _input(ctx, prop, i)
    layer = ctx.new_layer()
    dense = prop.after_dense
    if dense:
        where = f"inside a Sequential after a dense layer {dense[0]} -> {dense[1]}"
        # the dense layer in the dtype the checks run in, as the layer is
        out = ctx.adapter.call(ctx.in_dtype(ctx.adapter.nest(layer, tuple(dense))), [x])
    else:
        where = "on the layer alone"
        out = ctx.run(layer, [x])
    y = ctx.output_numpy(out, f"the output {where}")
    ulps = float(prop.ulps)
    scale = max(float(np.max(np.abs(x), initial=0.0)), float(np.max(np.abs(y), initial=0.0)))
    bound = ulps * float(finfo(y.dtype.name).eps) * scale
    mean = float(np.mean(y.astype(np.float64)))
    if not abs(mean) <= bound:
        return None, (f"property mean_zero {where}: the output's mean is {mean:.4g}, beyond roundoff "
                      f"({ulps:g} ulps x largest magnitude {scale:.4g} = {bound:.3g})")
    return {"where": where, "mean": mean, "bound": bound}, None


def _mean_square(ctx, prop, i):
    """With gain one, each row's output mean square is m2 / (m2 + eps), m2 the input's mean square."""
    eps = ctx.contract.constructor["eps"]  # a number: the contract's rules say so at load
    x = _input(ctx, prop, i)
    y = ctx.output_numpy(ctx.run(ctx.new_layer(), [x]))
    m2 = np.mean(x.astype(np.float64) ** 2, axis=-1)
    want = m2 / (m2 + eps)
    got = np.mean(y.astype(np.float64) ** 2, axis=-1)
    rtol, atol = ctx.tolerance("properties", str(y.dtype))
    diff = describe_mismatch(got, want, rtol, atol,
                             what="property mean_square: each row's output mean square vs m2 / (m2 + eps)")
    if diff:
        return None, diff
    return {"rows": int(m2.size), "min_expected": float(want.min())}, None


def _causal_mask(ctx, prop, i):
    """For every T from 1 to ``up_to``: the lower triangle and the diagonal of a T x T score matrix
    pass bit-equal, the strict upper triangle becomes -inf."""
    up_to = int(ctx.contract.resolve_dim(prop.up_to))
    layer = ctx.new_layer()
    for T in range(1, up_to + 1):
        x = _input(ctx, prop, i, name=f"T{T}", shape=(T, T))
        y = ctx.output_numpy(ctx.run(layer, [x]), f"the output at T={T}")
        if y.shape != x.shape:
            return None, f"property causal_mask at T={T}: output shape {list(y.shape)}, expected {[T, T]}"
        keep = np.tril(np.ones((T, T), dtype=bool))
        touched = keep & ~(y == x)
        if touched.any():
            r, c = (int(v) for v in np.argwhere(touched)[0])
            part = "the diagonal" if r == c else "the lower triangle"
            return None, (f"property causal_mask at T={T}: entry ({r}, {c}) on {part} changed from "
                          f"{x[r, c]:.6g} to {y[r, c]:.6g}; only positions after the query may be masked")
        leaked = ~keep & ~(y == -np.inf)
        if leaked.any():
            r, c = (int(v) for v in np.argwhere(leaked)[0])
            return None, (f"property causal_mask at T={T}: entry ({r}, {c}) above the diagonal is "
                          f"{y[r, c]:.6g}, not -inf: a query sees a later position")
    return {"sizes": f"1..{up_to}"}, None


KINDS = {"mean_zero": _mean_zero, "mean_square": _mean_square, "causal_mask": _causal_mask}


def check_properties(ctx):
    """Every property the contract states, each by its kind's single implementation."""
    props = ctx.contract.properties   # a layer's, stated: layer_conformance.checks.applicable
    problems, checked = [], []
    for i, prop in enumerate(props):
        detail, problem = KINDS[prop.kind](ctx, prop, i)
        if problem:
            problems.append(problem)
        else:
            checked.append({"kind": prop.kind, **detail})
    if problems:
        raise CheckFailed("; ".join(problems), checked=checked)
    return {"checked": checked}
