"""Numbers against the contract: ``values`` (numpy reference), ``native`` (the framework's layer),
``gradients`` (reference VJP, finite differences, declared surrogate rules)."""
from __future__ import annotations

import numpy as np

from ..record import NotApplicable
from ..dtypes import is_floating, np_dtype
from .. import inputs as inputs_mod
from ..compare import _moved, describe_mismatch, dtype_problem, max_abs_error, relative_error
from ..state_map import slot_value
from .base import CheckFailed, unexpected_error
from .common import call_native, native_layer, reference_forward, reference_vjp, set_native_state
from .functions import check_native_function, native_dtype_problem, nondiff_probe
from .mistakes import Findings, hint
from .reference_error import Judge, forward_in, vjp_in
from ..reference_run import reference


def _check_output(ctx, got, expected_dtype, what, given=None):
    """Dtype exact; returns the problem or None, saying what was promoted or demoted."""
    return dtype_problem(str(got.dtype), expected_dtype, what, given)


def check_values(ctx):
    """Outputs against the numpy reference on every case, with nondefault state."""
    layer, state, unset = ctx.layer_at(ctx.test_state())
    problems, worst, outputs, judge = [], 0.0, [], Judge(ctx, "values")
    for case in ctx.contract.cases:
        inputs = ctx.case_inputs(case)
        got = ctx.output_numpy(ctx.run(layer, inputs), f"case {case.name!r}: the output")
        outputs.append((inputs, got))
        expected = reference_forward(ctx, inputs, state)
        want_dtype = ctx.expected_dtype(inputs)
        if got.shape != expected.shape:
            problems.append(f"case {case.name!r}: output shape {list(got.shape)}, expected {list(expected.shape)}")
            continue
        given = next((str(a.dtype) for a in inputs if is_floating(a.dtype)), want_dtype)
        bad_dtype = _check_output(ctx, got, want_dtype, f"case {case.name!r}: output", given)
        if bad_dtype:
            problems.append(bad_dtype)
            continue
        own = forward_in(ctx, inputs, state)
        diff = judge.mismatch(got, expected, want_dtype, f"case {case.name!r}", lambda: own(want_dtype))
        worst = max(worst, max_abs_error(got, expected))
        if diff:
            problems.append(diff)
    if problems:
        from .mistakes import recognize  # a precision cause is the runner's to add (layer_conformance.checks.precision)
        known = recognize(ctx, state, outputs)
        raise CheckFailed("; ".join(problems) + (f". {known}" if known else ""), max_abs_error=worst)
    return {"max_abs_error": worst, **({"note": unset} if unset else {}),
            **({"notes": judge.notes} if judge.notes else {})}


def check_native(ctx):
    """Against the framework's own layer, with the same state, where the contract names one."""
    spec = ctx.contract.native[ctx.adapter.name]   # one is named: layer_conformance.checks.applicable
    if spec.function is not None:
        return check_native_function(ctx, spec)
    native = native_layer(ctx, spec)
    ours, state, unset = ctx.layer_at(ctx.test_state())
    set_native_state(ctx, native, spec, state)
    problems, worst = [], 0.0
    for case in ctx.contract.cases:
        inputs = ctx.case_inputs(case)
        got = ctx.output_numpy(ctx.run(ours, inputs))
        want = ctx.adapter.numpy(call_native(ctx, native, spec, case, inputs))
        what = f"case {case.name!r} vs native {spec.class_path}"
        # the native layer's output dtype is part of what it does: a layer that promotes or demotes it differs
        bad_dtype = native_dtype_problem(got, want, inputs, what)
        if bad_dtype:
            problems.append(bad_dtype)
            continue
        rtol, atol = ctx.tolerance("native", str(want.dtype))
        diff = describe_mismatch(got, want, rtol, atol, what=what)
        if got.shape == want.shape:
            worst = max(worst, max_abs_error(got, want))
        if diff:
            problems.append(diff)
    if problems:
        raise CheckFailed("; ".join(problems), max_abs_error=worst)
    return {"max_abs_error": worst, **({"note": unset} if unset else {})}


# --- gradients -------------------------------------------------------------------------

def _rule_recorded(ctx, layer, inputs, idx):
    """Asks the adapter once, when first called, whether the call records a custom backward rule: True, False,
    or None where the framework cannot tell or the call raises (then no evidence either way)."""
    answer = []

    def ask():
        if not answer:
            try:
                answer.append(ctx.adapter.custom_rule_recorded(ctx.callable(layer), inputs, idx))
            except Exception:
                answer.append(None)
        return answer[0]
    return ask


def _zero_hint(ctx, recorded) -> str:
    """Why a gradient is all zeros, from whether a custom rule was recorded: a rule that ran and returned zeros
    and one that never ran give the same numbers, so without that evidence there is no hint."""
    ran = recorded() if recorded is not None else None
    if ran is None:
        return ""
    if ran:
        return hint("zero_gradient_rule_ran")
    return hint("zero_gradient") + hint("zero_gradient_framework", ctx.adapter.name)


def _pattern_hint(ctx, got, expected, recorded=None) -> str:
    """Name the usual mistakes: a rule that never ran (or ran and returned zeros), or a surrogate off by a
    constant factor."""
    g, e = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape or not np.any(e):
        return ""
    if not np.any(g):
        return _zero_hint(ctx, recorded)
    mask = np.abs(e) > 1e-12
    ratios = g[mask] / e[mask]
    # a ratio within the same 1e-3 of one is rounding, not a scale (said as "1x" it would be no hint)
    if (ratios.size and np.allclose(ratios, ratios[0], rtol=1e-3) and not np.isclose(ratios[0], 1.0, rtol=1e-3)
            and not np.isclose(ratios[0], 0.0)):
        return " " + hint("scaled_gradient", ratio=f"{ratios[0]:.4g}")
    return ""


def _compare_grad(ctx, label, got, expected, input_like, rule, recorded=None, judged=None):
    """None where the gradient is right, else (what is wrong, the hint or ''). ``recorded``: ``_rule_recorded``'s
    question for this call; ``judged``: (the check's Judge, the reference's gradient run in a dtype) where the
    reference's own error may loosen the table (layer_conformance.checks.reference_error)."""
    if got is None:
        if recorded is not None and recorded():
            return f"no gradient reached {label}: the layer's custom backward rule ran and returned None for it", ""
        return f"no gradient reached {label} (the framework returned None): it is cut off from the output", ""
    g = ctx.adapter.numpy(got) if not isinstance(got, np.ndarray) else got
    if tuple(g.shape) != tuple(np.shape(input_like)):
        return f"gradient for {label} has shape {list(g.shape)}, expected {list(np.shape(input_like))}", ""
    want_dtype = str(np.asarray(input_like).dtype) if isinstance(input_like, np.ndarray) else ctx.adapter.dtype_name(input_like)
    if str(g.dtype) != want_dtype:
        moved = _moved(str(g.dtype), want_dtype)
        return (f"gradient for {label} has dtype {g.dtype}, expected {want_dtype}"
                + (f" (the backward {moved} the gradient of a {want_dtype} value to {g.dtype})" if moved else "")), ""
    what = f"gradient for {label} vs the {rule}"
    if judged is not None:
        judge, own = judged
        diff = judge.mismatch(g, expected, str(g.dtype), what, lambda: own(str(g.dtype)))
    else:
        rtol, atol = ctx.tolerance("gradients", str(g.dtype))
        diff = describe_mismatch(g, expected, rtol, atol, what=what, ulps=ctx.ulps("gradients", str(g.dtype)))
    if not diff:
        return None
    return diff, _pattern_hint(ctx, g, expected, recorded).strip()


_FLOAT64_LEVEL = 1e-12   # relative error of a layer that computes in float64 (measured ~1e-16)
_NO_STEP_ABOVE = 1e-4    # coarser than this (bfloat16, float16) no step gives a meaningful difference


def _effective_epsilon(ctx, out64, expected):
    """The precision the layer actually computes at: the relative distance of its float64 output
    from the float64 reference at the same point (a layer that upcasts to float32 inside forward
    shows ~1e-7, one that computes in float64 ~1e-16). Returns (eps_eff, why-not or None)."""
    got = ctx.adapter.numpy(out64)
    if str(got.dtype) != "float64":
        return None, (f"the layer given float64 inputs and state returns {got.dtype}, so it does not compute in "
                      f"float64 and a finite difference of its output measures rounding, not the derivative")
    got = got.astype(np.float64)
    want = np.asarray(expected, dtype=np.float64)
    if got.shape != want.shape:
        return None, f"the float64 layer's output has shape {list(got.shape)}, the reference {list(want.shape)}"
    rel = relative_error(got, want)
    if np.isnan(rel):
        return None, "the float64 output has no finite value to difference"
    eps = max(rel, float(np.finfo(np.float64).eps))
    if eps > _NO_STEP_ABOVE:
        return None, (f"the layer's float64 output is {rel:.2g} (relative) from the float64 reference, so it "
                      f"computes at a coarse fixed precision where no finite-difference step is meaningful")
    return eps, None


def _finite_difference(ctx, layer, inputs, idx, cotangent, rng, expected):
    """Float64 central difference along one random direction per input (fast, size-independent):
    <v, J u> from the VJP against (f(x + h u) - f(x - h u)) / 2h projected on v.

    The step and tolerance follow the precision the layer computes at (``_effective_epsilon``): in
    float64 a unit direction and h = 1e-6; a layer that computes in float32 inside forward gets a
    direction scaled to each element's size (so every element is perturbed well above its own
    rounding), h ~ cbrt(eps_eff), and a tolerance from the rounding bound eps_eff * |f| / h plus
    the truncation error measured by a second difference at 2h. Returns (problems, note or None)."""
    adapter = ctx.adapter
    layer64 = adapter.to_float64(layer) if layer is not None else None
    if layer is not None and layer64 is None:
        return None, "this framework cannot cast the layer to float64"
    fn = ctx.callable(layer64)
    # every floating input, held-constant ones too: TF and MXNet refuse float32 * float64
    x64 = [a.astype(np.float64) if i in idx or is_floating(a.dtype) else a
           for i, a in enumerate(inputs)]
    got = adapter.vjp(fn, layer64, x64, idx, cotangent.astype(np.float64))
    out64, grads = got.output, got.inputs
    eps, why = _effective_epsilon(ctx, out64, expected)
    if eps is None:
        return None, why
    coarse = eps > _FLOAT64_LEVEL
    h = 1e-6 if not coarse else float(np.cbrt(eps))

    def difference(i, u, step):
        plus = [a + step * u if j == i else a for j, a in enumerate(x64)]
        minus = [a - step * u if j == i else a for j, a in enumerate(x64)]
        f_plus = adapter.numpy(adapter.call(fn, plus)).astype(np.float64)
        f_minus = adapter.numpy(adapter.call(fn, minus)).astype(np.float64)
        # positions fixed at +-inf (a mask) carry no derivative
        finite = np.isfinite(f_plus) & np.isfinite(f_minus)
        fp, fm = np.where(finite, f_plus, 0.0), np.where(finite, f_minus, 0.0)
        numeric = float(np.sum((fp - fm) / (2 * step) * cotangent))
        rounding = eps * float(np.sum(np.abs(cotangent) * (np.abs(fp) + np.abs(fm)))) / (2 * step)
        return numeric, rounding

    problems, note = [], None
    for i in idx:
        if grads[i] is None:
            continue
        u = rng.standard_normal(inputs[i].shape)
        if coarse:
            u = u * np.abs(x64[i])
            if not np.any(u):
                continue
        numeric, rounding = difference(i, u, h)
        analytic = float(np.sum(adapter.numpy(grads[i]).astype(np.float64) * u))
        if not coarse:
            ok = np.isclose(analytic, numeric, rtol=1e-5, atol=1e-6)
        else:
            numeric2, rounding2 = difference(i, u, 2 * h)
            # central differences err by c h^2: D(2h) - D(h) ~ 3 c h^2 measures it, rounding included
            truncation = abs(numeric2 - numeric) / 3 + rounding2 / 3
            bound = 4 * (rounding + truncation) + 1e-5 * abs(numeric)
            ok = abs(analytic - numeric) <= bound
            note = (f"finite differences at the layer's measured precision: it computes at ~{eps:.2g} relative "
                    f"(its float64 output against the float64 reference), so h = {h:.2g} along element-scaled "
                    f"directions, tolerance from rounding and measured truncation")
        if not ok:
            problems.append(f"input {i}: directional derivative from the VJP {analytic:.8g} != finite "
                            f"difference {numeric:.8g}")
    return problems, note


def _input_grad_flags(ctx) -> str | None:
    from ..frameworks import FRAMEWORKS
    known = FRAMEWORKS.get(ctx.adapter.name)
    return known.input_grad_flags if known is not None else None


def _alone(ctx, case, layer, inputs, names, right, cotangent, ref, rule, problems, judged) -> None:
    """Each input whose gradient is right when every differentiable input requires one, differentiated alone (the
    others frozen, as a frozen weight is): a backward that computes one input's gradient under another's
    ``needs_input_grad`` (or ``requires_grad``) test gives it only when both require one."""
    for i in right:
        try:
            grads = ctx.adapter.vjp(ctx.callable(layer), layer, inputs, [i], cotangent).inputs
        except Exception as exc:
            problems.append(f"case {case.name!r}: differentiating with only {names[i]!r} requiring a gradient "
                            f"raised {unexpected_error(exc)}")
            continue
        label = f"input {names[i]!r} (case {case.name!r}) with only {names[i]!r} requiring a gradient"
        bad = _compare_grad(ctx, label, grads[i], ref[names[i]], inputs[i], rule,
                            _rule_recorded(ctx, layer, inputs, [i]), judged(names[i]))
        if bad:
            frozen = ", ".join(repr(n) for k, n in enumerate(names) if k != i and n in ref)
            problems.add(bad[0], f"the gradient of {names[i]!r} is right while every input requires one: the "
                                 f"backward computes it under another input's test ({frozen} frozen here); a "
                                 f"backward tests {_input_grad_flags(ctx)} with k the input's own position")


def _worked_examples(ctx, state, rule, problems):
    """The contract's worked examples of the gradient, each against its expected values; returns the state the
    layer was last built with."""
    contract, adapter = ctx.contract, ctx.adapter
    for example in contract.gradients.worked_examples:
        names = list(contract.cases[0].inputs)
        dtypes = {n: s.dtype for n, s in contract.cases[0].inputs.items()}
        x = [np.asarray(example.inputs[n], dtype=np_dtype(dtypes[n])) for n in names]
        idx = [i for i, n in enumerate(names) if n in example.expected]
        layer, state, _ = ctx.layer_at(state)
        try:
            grads = adapter.vjp(ctx.callable(layer), layer, x, idx, np.asarray(example.cotangent)).inputs
        except NotApplicable:
            raise   # a dtype the framework has not (MXNet's bfloat16): n/a, not a failure
        except Exception as exc:
            raise CheckFailed(f"differentiating the worked example raised {unexpected_error(exc)}") from exc
        for i in idx:
            want = np.asarray(example.expected[names[i]], dtype=np.float64)
            label = f"{names[i]!r} in the worked example{': ' + example.description if example.description else ''}"
            bad = _compare_grad(ctx, label, grads[i], want, x[i], rule, _rule_recorded(ctx, layer, x, idx))
            if bad:
                problems.add(*bad)
    return state


def check_gradients(ctx):
    """Gradients w.r.t. inputs and trainable slots against the reference VJP (true or surrogate)."""
    contract, adapter = ctx.contract, ctx.adapter
    grads_spec = contract.gradients
    mode = grads_spec.mode
    rule = "declared surrogate rule" + (f" ({grads_spec.rule})" if grads_spec.rule else "") \
        if mode == "surrogate" else "reference derivative"
    _, _, ref_vjp = reference(contract)
    state = ctx.test_state()
    problems, notes, judge = Findings(), [], Judge(ctx, "gradients")
    state = _worked_examples(ctx, state, rule, problems)

    rng = inputs_mod.rng_for(ctx.seed, contract.name, "gradients")
    for case in contract.cases:
        inputs = ctx.case_inputs(case)
        names, idx, slots = ctx.contract.differentiated(case)
        layer, state, unset = ctx.layer_at(state)
        if unset and unset not in notes:
            notes.append(unset)
        mapping = ctx.slot_map(layer) if layer is not None else {}
        expected_out = reference_forward(ctx, inputs, state)
        cotangent = rng.standard_normal(expected_out.shape)
        try:
            got = adapter.vjp(ctx.callable(layer), layer, inputs, idx, cotangent)
            grads, state_grads = got.inputs, got.state
        except Exception as exc:
            problems.append(f"case {case.name!r}: differentiating raised {unexpected_error(exc)}")
            raise CheckFailed(problems.text()) from exc
        ref = reference_vjp(ctx, ref_vjp, cotangent, inputs, state) if ref_vjp else {}
        recorded = _rule_recorded(ctx, layer, inputs, idx)
        own = vjp_in(ctx, cotangent, inputs, state)
        judged = lambda name, own=own: (judge, lambda dtype: own(dtype, name))  # noqa: E731
        right = []
        for i in idx:
            bad = _compare_grad(ctx, f"input {names[i]!r} (case {case.name!r})", grads[i], ref[names[i]],
                                inputs[i], rule, recorded, judged(names[i]))
            if bad:
                problems.add(*bad)
            else:
                right.append(i)
        # the other real configurations: each input alone requiring a gradient, the rest frozen, where a backward
        # can tell them apart (frameworks.Framework.input_grad_flags)
        if len(idx) > 1 and _input_grad_flags(ctx):
            _alone(ctx, case, layer, inputs, names, right, cotangent, ref, rule, problems, judged)
        for slot in slots:
            name = mapping.get(slot)
            if name is None:
                problems.append(f"trainable slot {slot!r} not found in the layer; cannot check its gradient")
                continue
            params = adapter.trainable(layer)
            like = params.get(name)
            if like is None:
                problems.append(f"trainable slot {slot!r} is not trainable, so it gets no gradient")
                continue
            got = state_grads.get(name)
            got = None if got is None else slot_value(name, adapter.numpy(got))  # in the slot's layout
            bad = _compare_grad(ctx, f"slot {slot!r} (case {case.name!r})", got, ref[slot],
                                slot_value(name, adapter.numpy(like)), rule, recorded, judged(slot))
            if bad:
                problems.add(*bad)
        problems += nondiff_probe(ctx, case, layer, inputs, cotangent, notes)
        if mode == "true" and grads_spec.finite_difference and not problems:
            fd, why = _finite_difference(ctx, layer, inputs, idx, cotangent, rng, expected_out)
            if fd is None:
                notes.append(f"case {case.name!r}: finite differences skipped: {why}")
            else:
                problems += [f"case {case.name!r}: {p}" for p in fd]
                if why:
                    notes.append(f"case {case.name!r}: {why}")
    if problems:
        raise CheckFailed(problems.text())
    notes += judge.notes
    return {"notes": notes} if notes else None
