"""Aliasing: ``aliasing``. One tensor passed twice, and inputs changed in place.

Part 1, for a function contract with gradients: on the first case with two differentiable inputs of the same
shape and dtype, the function is also called with one tensor passed for both; its gradient w.r.t. that tensor
must be the sum of the two inputs' gradients of the normal call (on the same values), eagerly and under the
framework's compiler (``torch.compile`` with the run's backend, ``tf.function``, ``jax.jit``; a function is not
hybridized in MXNet: n/a there). The gradients' tolerance table judges it (the sum adds in another order).

Part 2: calling the layer (evaluation mode) on the first case, and one backward pass, must leave its inputs as
they were (values compared before and after; in torch the version counter too, which an in-place write moves
even where it writes the same values). With ``aliasing: {in_place: true}`` the change is the layer's meaning:
the version counter must show it, the output must equal the one on an input that is not written into, and the
input gradients of that run must equal the reference VJP's (a backward that reads a tensor the forward
overwrote). JAX and TensorFlow arrays are immutable: that part is n/a there. Where both parts are n/a the check is n/a with both
reasons. Cost: a few forward and backward passes, one compilation for a function contract with such a pair.
"""
from __future__ import annotations

import numpy as np

from .. import inputs as inputs_mod
from ..compare import describe_mismatch
from ..dtypes import is_floating
from ..record import NotApplicable
from ..reference_run import reference
from .base import CheckFailed, unexpected_error
from .common import reference_vjp
from .mistakes import hint
from ..check_catalog import na_of


def _pair(ctx):
    """(case, inputs, i, j, names) for the first case with two differentiable inputs of one shape and dtype."""
    for case in ctx.contract.cases:
        names, idx, _ = ctx.contract.differentiated(case)
        inputs = ctx.case_inputs(case)
        for a in idx:
            for b in idx:
                if a < b and inputs[a].shape == inputs[b].shape and inputs[a].dtype == inputs[b].dtype \
                        and is_floating(inputs[a].dtype):
                    return case, inputs, a, b, names
    return None


def _same_tensor(ctx, problems, hints):
    """Part 1; its note, or raises NotApplicable with why it does not apply."""
    contract, adapter = ctx.contract, ctx.adapter
    if not ctx.is_function:
        raise NotApplicable("one tensor passed twice: the contract is a layer, not a function of several inputs",
                            code="contract_cases")
    if not contract.gradients.declared:
        raise NotApplicable("one tensor passed twice: the contract declares no gradient", code="contract_cases")
    found = _pair(ctx)
    if found is None:
        raise NotApplicable("one tensor passed twice: no case has two differentiable inputs of the same shape and "
                            "dtype", code="contract_cases")
    case, inputs, i, j, names = found
    fn = ctx.callable(None)
    same = list(inputs)
    same[j] = np.array(inputs[i], copy=True)
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "aliasing")
    ct = rng.standard_normal(ctx.output_numpy(adapter.call(fn, same), "the output").shape)
    grads = adapter.vjp(fn, None, same, [i, j], ct).inputs
    if grads[i] is None or grads[j] is None:
        raise NotApplicable(f"one tensor passed twice: the normal call gives no gradient for {names[i]!r} or "
                            f"{names[j]!r}", code="no_gradient")
    want = ctx.output_numpy(grads[i], "a gradient").astype(np.float64) + \
        ctx.output_numpy(grads[j], "a gradient").astype(np.float64)
    dtype = str(ctx.output_numpy(grads[i], "a gradient").dtype)
    rtol, atol = ctx.tolerance("gradients", dtype)
    what = f"case {case.name!r}: one tensor passed as both {names[i]!r} and {names[j]!r}"
    said = []
    ways = [("eagerly", None)] + [(f"under {c}", c) for c in adapter.compilers(ctx.compile_backend)[:1]]
    for way, compiler in ways:
        try:
            got = adapter.aliased_vjp(fn, same, i, j, ct, compiled=compiler).gradient
        except NotApplicable as exc:
            said.append(f"{way} n/a: {exc}")
            continue
        except Exception as exc:
            if compiler is not None:  # the compiler's own failures are the compiled check's to judge
                said.append(f"{way} not judged: it raised {unexpected_error(exc)}")
                continue
            raise CheckFailed(f"{what}: differentiating raised {unexpected_error(exc)}. "
                              + hint("aliasing_same_tensor")) from exc
        if got is None:
            problems.append(f"{what}, {way}: no gradient for it, where the normal call gives one for each")
            continue
        diff = describe_mismatch(ctx.output_numpy(got, "the aliased gradient"), want.astype(dtype), rtol, atol,
                                 what=f"{what}, {way}: its gradient against the sum of the two inputs' gradients "
                                      f"of the normal call")
        if diff:
            problems.append(diff)
            hints.add("aliasing_same_tensor")
        else:
            said.append(f"{way}: the gradient is the sum")
    return f"one tensor as {names[i]!r} and {names[j]!r} (case {case.name!r}): " + "; ".join(said)


def _unchanged(ctx, problems, hints):
    """Part 2; its note, or raises NotApplicable."""
    contract, adapter = ctx.contract, ctx.adapter
    if adapter.immutable_arrays:  # before the layer is built: a layer that cannot be built has it n/a all the same
        raise NotApplicable(adapter.immutable_arrays, code="immutable_arrays")
    spec = contract.aliasing
    case = contract.cases[0]
    inputs = ctx.case_inputs(case)
    names, idx, _ = contract.differentiated(case)
    layer, state, _ = ctx.layer_at(ctx.test_state())
    fn = ctx.callable(layer)
    plain = ctx.output_numpy(ctx.run(layer, inputs), f"the output on case {case.name!r}")
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "aliasing-inputs")
    ct = rng.standard_normal(plain.shape) if contract.gradients.declared else None
    try:
        seen = ctx.adapter.input_changes(fn, layer, inputs, idx if ct is not None else [], ct)
    except NotApplicable:
        raise
    except Exception as exc:
        raise CheckFailed(f"case {case.name!r}: calling the layer on inputs that are not leaves of the graph (so "
                          f"that an in-place write is allowed) and differentiating raised {unexpected_error(exc)}"
                          ) from exc
    label = lambda ks: ", ".join(repr(names[k]) for k in ks)
    versions = seen.versions
    ops = {int(k): v for k, v in seen.ops.items()}
    by = lambda ks: "".join(f" ({', '.join(ops[k])} writes into {names[k]!r})" for k in ks if ops.get(k))
    if not spec.in_place:
        if seen.forward:
            problems.append(f"case {case.name!r}: the call changed its input {label(seen.forward)}"
                            f"{by(seen.forward)}. " + hint("aliasing_mutates_input"))
        elif seen.backward:
            problems.append(f"case {case.name!r}: the backward pass changed the input {label(seen.backward)}. "
                            + hint("aliasing_mutates_input"))
        elif versions:
            problems.append(f"case {case.name!r}: the version counter of input {label(versions)} moved (an "
                            f"in-place write, of the same values here). " + hint("aliasing_mutates_input"))
        return "the inputs are unchanged" + ("" if versions is None else " (values and version counters)")
    if versions is not None and not versions:
        problems.append(f"case {case.name!r}: the contract declares aliasing: {{in_place: true}}, but no input's "
                        f"version counter moved" + (f" although {label(seen.forward)} changed: the layer "
                                                    f"writes around autograd (.data, a storage)"
                                                    if seen.forward else ": the layer does not write into "
                                                                            "its input"))
    elif versions is None and not seen.forward:
        problems.append(f"case {case.name!r}: the contract declares aliasing: {{in_place: true}}, but no input "
                        f"changed")
    got = ctx.output_numpy(seen.output, "the output on inputs written in place")
    rtol, atol = ctx.tolerance("values", str(plain.dtype))
    diff = describe_mismatch(got, plain, rtol, atol, what=f"case {case.name!r}: the output with the input written "
                                                          f"in place against the one on a fresh input")
    if diff:
        problems.append(diff)
    return "in place, as declared" + _in_place_gradients(ctx, case, inputs, state, idx, names, ct, seen, problems)


def _in_place_gradients(ctx, case, inputs, state, idx, names, ct, seen, problems) -> str:
    """The gradients of the run that wrote in place against the reference VJP (the layer's meaning, out of
    place): a backward that reads a saved tensor the forward overwrote shows here."""
    grads = seen.input_grads
    if ct is None or not any(grads[i] is not None for i in idx):
        return ""
    _, _, ref_vjp = reference(ctx.contract)
    if ref_vjp is None:
        return "; its gradients not compared: the reference has no vjp"
    ref = reference_vjp(ctx, ref_vjp, ct, inputs, state)
    for i in idx:
        if grads[i] is None:
            problems.append(f"case {case.name!r}: written in place, input {names[i]!r} gets no gradient")
            continue
        got = ctx.output_numpy(grads[i], "a gradient")
        rtol, atol = ctx.tolerance("gradients", str(got.dtype))
        diff = describe_mismatch(got, np.asarray(ref[names[i]]).astype(got.dtype), rtol, atol,
                                 what=f"case {case.name!r}: the gradient of input {names[i]!r} with the input "
                                      f"written in place against the reference's")
        if diff:
            problems.append(diff + ": the backward reads what the forward overwrote (a tensor saved before "
                                   "the in-place write, or the input itself)")
    return "; its gradients agree with the reference's"


def check_aliasing(ctx):
    problems, said, na, hints = [], {}, [], set()
    for part, run in (("same_tensor", _same_tensor), ("inputs", _unchanged)):
        try:
            said[part] = run(ctx, problems, hints)
        except NotApplicable as exc:
            na.append(exc)
            said[part] = f"n/a: {exc}"
    if problems:
        raise CheckFailed("; ".join(problems) + "".join(". " + hint(h) for h in sorted(hints)), **said)
    if len(na) == 2:
        raise na_of(na)
    return said
