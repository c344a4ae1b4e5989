"""Second-order differentiation: ``second_order``, where the contract asks for it.

grad of grad differentiates through the custom backward rule, so it works only when the rule is
itself differentiable: written with the framework's ops, not numpy, and not detached from the
graph. On every case the framework's Hessian-vector product (the gradient of
<grad sum(f(x) * g), v> w.r.t. x, for a random cotangent g and direction v) must equal the
reference module's function named by ``second_order.reference``:
``hvp(g, v, *inputs, **constructor) -> {input name: array}``, with ``v`` a dict of one direction
per differentiated input. A layer's state is held constant.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import is_floating
from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from .base import CheckFailed, CheckSkipped, unexpected_error
from ..record import NotApplicable
from ..reference_run import reference
from .mistakes import hint


def _not_differentiable(fw: str) -> str:
    return hint("rule_not_differentiable", fw)


def _float64(a):
    return a.astype(np.float64) if is_floating(a.dtype) else a


def check_second_order(ctx):
    """Every named case against the reference's Hessian-vector product."""
    spec = ctx.contract.second_order   # present: layer_conformance.checks.applicable
    from .common import reference_forward
    adapter, contract = ctx.adapter, ctx.contract
    mod, _, _ = reference(contract)
    ref_hvp = getattr(mod, spec.reference)
    names = [c.name for c in contract.cases]
    cases = [c for c in contract.cases if c.name in (spec.cases or names)]
    state = ctx.test_state()
    kw = {**contract.constructor, **state}
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "second_order")
    problems, compared, constant_rule = [], 0, False
    raised: dict[str, list[str]] = {}  # error -> the cases it was raised on (said once)
    for case in cases:
        inputs = ctx.case_inputs(case)
        input_names, idx, _ = contract.differentiated(case)
        if not idx:
            continue
        out_dtype = ctx.expected_dtype(inputs)
        # drawn in the dtypes the framework computes in, so the reference sees the same numbers
        g = rng.standard_normal(reference_forward(ctx, inputs, state).shape).astype(out_dtype)
        v = [rng.standard_normal(a.shape).astype(a.dtype) if i in idx else None for i, a in enumerate(inputs)]
        layer, state, _ = ctx.layer_at(state)
        kw = {**contract.constructor, **state}
        try:
            got = ctx.adapter.hvp(ctx.callable(layer), layer, inputs, idx, g, v).inputs
        except (CheckSkipped, NotApplicable):
            raise
        except Exception as exc:
            raised.setdefault(unexpected_error(exc), []).append(repr(case.name))
            continue
        want = ref_hvp(_float64(g), {input_names[i]: _float64(v[i]) for i in idx},
                       *[_float64(a) for a in inputs], **kw)
        for i in idx:
            label = f"input {input_names[i]!r} (case {case.name!r})"
            expected = np.asarray(want[input_names[i]], dtype=np.float64)
            h = got[i]
            h = None if h is None else (h if isinstance(h, np.ndarray) else adapter.numpy(h))
            compared += 1
            if h is None or not np.any(h):
                if np.any(expected):
                    what = "None (no second-order gradient)" if h is None else "all zeros"
                    problems.append(f"the Hessian-vector product for {label} is {what}, expected nonzero "
                                    f"(max |expected| = {float(np.max(np.abs(expected))):.4g}): the backward "
                                    f"rule's result is a constant to autodiff")
                    constant_rule = True
                continue
            if tuple(h.shape) != tuple(inputs[i].shape) or str(h.dtype) != str(inputs[i].dtype):
                problems.append(f"the Hessian-vector product for {label} has shape {list(h.shape)} and dtype "
                                f"{h.dtype}, expected {list(inputs[i].shape)} and {inputs[i].dtype}")
                continue
            rtol, atol = ctx.tolerance("second_order", str(h.dtype))
            diff = describe_mismatch(h, expected, rtol, atol,
                                     what=f"Hessian-vector product for {label} vs the reference {spec.reference}")
            if diff:
                problems.append(diff)
    problems = [f"case{'s' if len(where) > 1 else ''} {', '.join(where)}: differentiating the gradient "
                f"raised {error}" for error, where in raised.items()] + problems
    constant_rule = constant_rule or bool(raised)
    if problems:
        raise CheckFailed("; ".join(problems) + (f". {_not_differentiable(adapter.name)}" if constant_rule else ""))
    return {"compared": compared}
