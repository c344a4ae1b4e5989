"""Forward-mode differentiation: ``forward_mode``, where the contract asks for it.

A custom JVP rule (JAX ``custom_jvp``, torch ``Function.jvp``) must give the worked examples'
tangents and, on every case, J t for a random tangent t. J comes from the reference VJP
(transposed), so no second reference function is needed: the forward and the reverse rule
must describe the same linear map.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import np_dtype
from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from .base import CheckFailed, CheckSkipped, unexpected_error
from ..record import NotApplicable
from ..reference_run import reference
from .common import reference_vjp

_EXACT_UP_TO = 256  # outputs up to this size get the full J t; larger ones random projections


def _reference_jt(ctx, ref_vjp, inputs, state, idx, names, tangents, out_shape, rng):
    """(expected, what) where expected is J t (or projections <v_k, J t> = <J^T v_k, t>)."""
    def jt_dot(v):
        ref = reference_vjp(ctx, ref_vjp, v, inputs, state)
        return sum(float(np.sum(np.asarray(ref[names[i]]) * tangents[i])) for i in idx)
    size = int(np.prod(out_shape)) if out_shape else 1
    if size <= _EXACT_UP_TO:
        basis = np.eye(size).reshape((size,) + tuple(out_shape))
        return np.array([jt_dot(e) for e in basis]).reshape(out_shape), None
    vs = [rng.standard_normal(out_shape) for _ in range(4)]
    return np.array([jt_dot(v) for v in vs]), vs


def check_forward_mode(ctx):
    """Worked examples exactly as stated; every case against the reference's linear map."""
    spec = ctx.contract.forward_mode   # present: layer_conformance.checks.applicable
    from .common import reference_forward
    adapter, contract = ctx.adapter, ctx.contract
    state = ctx.test_state()
    _, _, ref_vjp = reference(contract)
    problems = []

    def push(layer, x, t, what):
        try:
            return ctx.adapter.jvp(ctx.callable(layer), layer, x, t)
        except (CheckSkipped, NotApplicable):
            raise
        except Exception as exc:
            raise CheckFailed(f"forward-mode differentiation {what} raised {unexpected_error(exc)}") from exc

    first = contract.cases[0].inputs
    for k, ex in enumerate(spec.worked_examples):
        what = f"in worked example {k}" + (f" ({ex.description})" if ex.description else "")
        x = [np.asarray(ex.inputs[n], dtype=np_dtype(s.dtype)) for n, s in first.items()]
        t = [np.asarray(ex.tangents[n], dtype=np_dtype(s.dtype)) if n in ex.tangents else None
             for n, s in first.items()]
        layer, state, _ = ctx.layer_at(state)
        pushed = push(layer, x, t, what)
        for label, got, want in (("output", pushed.output, ex.expected.output),
                                 ("tangent", pushed.tangent, ex.expected.tangent)):
            got = ctx.output_numpy(got, f"the {label} {what}")
            rtol, atol = ctx.tolerance("forward_mode", str(got.dtype))
            diff = describe_mismatch(got, np.asarray(want, dtype=np.float64), rtol, atol, what=f"{label} {what}")
            if diff:
                problems.append(diff)

    rng = inputs_mod.rng_for(ctx.seed, contract.name, "forward_mode")
    for case in contract.cases:
        inputs = ctx.case_inputs(case)
        names, idx, _ = contract.differentiated(case)
        tangents = [rng.standard_normal(a.shape).astype(a.dtype) if i in idx else None for i, a in enumerate(inputs)]
        layer, state, _ = ctx.layer_at(state)
        tan = push(layer, inputs, tangents, f"on case {case.name!r}").tangent
        got = ctx.output_numpy(tan, f"case {case.name!r}: the output tangent")
        want_out = reference_forward(ctx, inputs, state)
        if got.shape != want_out.shape:
            problems.append(f"case {case.name!r}: the output tangent has shape {list(got.shape)}, "
                            f"expected {list(want_out.shape)}")
            continue
        want, projections = _reference_jt(ctx, ref_vjp, inputs, state, idx, names,
                                          [t if t is None else t.astype(np.float64) for t in tangents],
                                          want_out.shape, rng)
        if projections is not None:
            got = np.array([float(np.sum(got.astype(np.float64) * v)) for v in projections])
        rtol, atol = ctx.tolerance("forward_mode", str(ctx.output_numpy(tan).dtype))
        diff = describe_mismatch(got, want, rtol, atol,
                                 what=f"case {case.name!r}: output tangent vs the reference's J t")
        if diff:
            problems.append(diff)
    if problems:
        raise CheckFailed("; ".join(problems))
