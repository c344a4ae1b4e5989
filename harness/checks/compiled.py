"""The layer under the framework's compiler: ``compiled``.

Users ship layers compiled (torch.compile, tf.function with and without XLA, jax.jit, Gluon
hybridize()), and that is where custom gradients and Python-side logic break silently: a graph
reads a Python flag or global once, at trace time; a layer branches in Python on a tensor's value.
On every case the compiled output and gradients (w.r.t. inputs and trainable slots, true or the
declared surrogate: whatever the eager layer gives) must agree with the same layer run eagerly.

Compilation is proved, not assumed: the adapter counts traces (torch: graphs through a counting
backend, with Dynamo's graph-break and guard-failure reasons). A second call with identical inputs
must not recompile; calls with two other batch sizes may recompile at most ``max_recompiles``
times (default: one per new size; torch's automatic dynamic shapes needs one). Where every compiler of
the framework traces anew for every shape by design (``Adapter.retraces_per_shape``: tf.function,
jax.jit), one new batch size is tried: a second could only show the same. Graph breaks fail
unless the contract allows them with a reason. One compiled object per layer and compiler is
reused for every call, as a user's would be.
"""
from __future__ import annotations

import numpy as np

from ..compare import describe_mismatch
from .base import CheckFailed, CheckSkipped, unexpected_error
from .mistakes import Findings, hint

_VALUE_ERRORS = ("ConcretizationTypeError", "TracerBoolConversionError", "TracerArrayConversionError",
                 "TracerIntegerConversionError", "OperatorNotAllowedInGraphError", "asnumpy", "item()",
                 "symbolic tf.Tensor", "Symbolic", "numpy() is only available", "has no attribute 'numpy'",
                 "Data-dependent")


def _np(adapter, t):
    return None if t is None else (t if isinstance(t, np.ndarray) else adapter.numpy(t))


def _batch_case(ctx):
    """The case whose inputs share a literal leading (batch) dimension, highest rank first, or None."""
    best = None
    for case in ctx.contract.cases:
        shapes = [spec.shape or () for spec in case.inputs.values()]  # a literal value: no batch
        heads = {s[0] for s in shapes if len(s) >= 1}
        if len(heads) != 1 or not isinstance(next(iter(heads)), int) or not any(len(s) >= 2 for s in shapes):
            continue
        if any(len(s) == 0 for s in shapes):
            continue
        rank = max(len(s) for s in shapes)
        if best is None or rank > best[0]:
            best = (rank, case)
    return None if best is None else best[1]


def _resized(inputs, n):
    """Every input with ``n`` rows along axis 0, rows reused cyclically (edge rows stay in)."""
    return [np.take(a, np.arange(n) % a.shape[0], axis=0) for a in inputs]


def _diagnose(compiler, what, got, want, eager_again, retraced=None, tol=(0.0, 0.0)) -> str:
    """Name the mistake from how the compiled value differs from the eager one (``retraced``: the same call
    traced anew, where the eager one ran op by op; it matches the compiled one within ``tol``, another program)."""
    if got is not None and want is not None and got.shape == want.shape and \
            not np.array_equal(np.isfinite(got), np.isfinite(want)):
        return ""  # a degenerate formula (0/0, sqrt at 0) the compiler rewrites: no Python-side cause to name
    if want is not None and np.any(want) and got is not None and not np.any(got) and "gradient" in what:
        return hint("compiled_backward_unused", compiler=compiler)
    if eager_again is not None and not np.array_equal(eager_again, want, equal_nan=True):
        return hint("compiled_side_effect", compiler=compiler)
    if retraced is not None and retraced.shape == got.shape and np.allclose(retraced, got, rtol=tol[0], atol=tol[1],
                                                                            equal_nan=True):
        return hint("compiled_traced_branch", compiler=compiler)
    return hint("compiled_frozen_state", compiler=compiler)


def check_compiled(ctx):
    spec = ctx.contract.compiled
    from .common import reference_forward
    from .. import inputs as inputs_mod
    adapter, contract = ctx.adapter, ctx.contract
    state = inputs_mod.test_state(contract)
    differentiate = contract.gradients.declared
    extra_rows = (1,) if adapter.retraces_per_shape else (1, 2)  # the new batch sizes: n0 + each
    # one recompile per new size at most, unless the contract says
    max_recompiles = len(extra_rows) if spec.max_recompiles is None else spec.max_recompiles
    sizes_said = "one new batch size" if len(extra_rows) == 1 else f"{len(extra_rows)} new batch sizes"
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "compiled")
    details, problems = {}, Findings()  # each hint once, after all compilers' problems

    for compiler in adapter.compilers(ctx.compile_backend):
        eager_layer = ctx.new_layer(state)
        layer = ctx.new_layer(state)  # its own instance: compiling may change it (hybridize)
        mapping = ctx.slot_map(layer) if layer is not None else {}
        compiled = adapter.compile(ctx.callable(layer), layer, compiler)
        found: list[str] = []
        calls = {"n": 0, "raised": 0}  # raised: compiled calls that raised (a raise retraces: no recompile to judge)

        def stats():
            return adapter.compile_stats(compiled)

        def compare(label, inputs, idx, ct, training_first=False, op_by_op=False):
            """One compiled call against one eager call; returns the compiled output (numpy). ``op_by_op``: the
            eager call without any compiler even where the adapter's own calls trace (JAX), for the first case
            (a layer that tells a tracer from an array is caught there); the others run the Python eagerly,
            every call, as the adapter's calls do, and so cost a compile per program, not per primitive."""
            calls["n"] += 1
            try:
                if training_first:  # traced in training mode first: evaluation must still be honoured
                    adapter.compiled_call(compiled, inputs, training=True)
                if differentiate and idx:
                    c_out, c_in, c_state = adapter.compiled_vjp(compiled, layer, inputs, idx, ct)
                else:
                    c_out, c_in, c_state = adapter.compiled_call(compiled, inputs), [None] * len(inputs), {}
            except (CheckSkipped, CheckFailed):
                raise
            except Exception as exc:
                text = unexpected_error(exc)
                why = ""
                if any(k in text for k in _VALUE_ERRORS) or "Symbol" in text:
                    why = hint("compiled_reads_value")
                calls["raised"] += 1
                found.append(f"{label}: under {compiler} the layer raises {text}.")
                problems.say(why)
                return None
            if differentiate and idx:
                e_out, e_in, e_state = adapter.eager_vjp(ctx.callable(eager_layer), eager_layer, inputs, idx, ct,
                                                         op_by_op=op_by_op)
            else:
                e_out, e_in, e_state = adapter.eager_call(ctx.callable(eager_layer), inputs, op_by_op=op_by_op), \
                    [None] * len(inputs), {}
            got, want = _np(adapter, c_out), _np(adapter, e_out)
            pairs = [("output", got, want)]
            names = list(contract.cases[0].inputs) if len(contract.cases[0].inputs) == len(inputs) else \
                [str(i) for i in range(len(inputs))]
            pairs += [(f"gradient for input {names[i]!r}", _np(adapter, c_in[i]), _np(adapter, e_in[i])) for i in idx]
            if differentiate and layer is not None:
                slots = [s for s in contract.differentiated(contract.cases[0])[2] if s in mapping]
                pairs += [(f"gradient for slot {s!r}", _np(adapter, c_state.get(mapping[s])),
                           _np(adapter, e_state.get(mapping[s]))) for s in slots]
            for what, g, w in pairs:
                if g is None and w is None:
                    continue
                if g is None or w is None:
                    found.append(f"{label}: the {what} is {'None' if g is None else 'present'} under {compiler} "
                                 f"but {'None' if w is None else 'present'} eagerly")
                    continue
                if g.shape != w.shape or g.dtype != w.dtype:
                    found.append(f"{label}: the {what} under {compiler} has shape {list(g.shape)} and dtype "
                                 f"{g.dtype}, eagerly {list(w.shape)} and {w.dtype}")
                    continue
                rtol, atol = ctx.tolerance("compiled", str(w.dtype))
                diff = describe_mismatch(g, w, rtol, atol, what=f"{label}: {what} under {compiler} vs eager")
                if diff:
                    again = retraced = None
                    if what == "output":
                        again = _np(adapter, adapter.eager_call(ctx.callable(eager_layer), inputs, op_by_op=op_by_op))
                        if op_by_op:  # where the adapter's calls do not trace, this is the eager value again
                            retraced = _np(adapter, adapter.eager_call(ctx.callable(eager_layer), inputs,
                                                                       op_by_op=False))
                    found.append(diff)
                    problems.say(_diagnose(compiler, what, g, w, again, retraced, (rtol, atol)))
            return got

        # every case, in evaluation mode, after a training-mode trace where the layer has modes
        modes = bool(contract.modes) and layer is not None
        first = None
        for n, case in enumerate(contract.cases):
            inputs = ctx.case_inputs(case)
            _, idx, _ = contract.differentiated(case)
            ct = rng.standard_normal(reference_forward(ctx, inputs, state).shape)  # numpy: no extra eager run
            if first is None:
                first = (case, inputs, idx, ct)
            compare(f"case {case.name!r}", inputs, idx, ct, training_first=modes and n == 0, op_by_op=n == 0)
        after_cases = stats()
        if after_cases["traces"] < 1:
            found.append(f"{compiler} compiled nothing: no trace ran, so the layer ran eagerly (the compiler "
                         f"skipped it)")
        if after_cases["breaks"] and not spec.allow_graph_breaks:
            reasons = sorted(set(after_cases["breaks"]))
            found.append(f"{compiler} broke the graph {len(after_cases['breaks'])} time(s): "
                         f"{'; '.join(reasons)}; the layer is not captured as one graph (a contract may allow "
                         f"breaks with `compiled: {{allow_graph_breaks: reason}}`)")

        # the same call again: a compiled program must be reused
        case, inputs, idx, ct = first
        before = stats()
        compare(f"case {case.name!r} called again", inputs, idx, ct)
        again = stats()
        # a call that raised traces again on the next call whatever the layer does: that is the raise, said above
        if again["traces"] > before["traces"] and not calls["raised"]:
            guards = again["guard_failures"][len(before["guard_failures"]):]
            found.append(f"{compiler} recompiled on a second call with identical inputs"
                         + (f" (guard failed: {'; '.join(guards)})" if guards else "")
                         + ": the compiled program depends on Python state that changes from call to call "
                           "(a global or attribute the forward or backward reads, a counter); it recompiles on "
                           "every call")

        # other batch sizes
        bcase = _batch_case(ctx)
        batch_note = None
        if bcase is None:
            batch_note = "no case has a literal leading batch dimension shared by its inputs"
        else:
            binputs = ctx.case_inputs(bcase)
            _, bidx, _ = contract.differentiated(bcase)
            n0 = binputs[0].shape[0]
            before = stats()
            for n in (n0 + k for k in extra_rows):
                resized = _resized(binputs, n)
                try:
                    shape = reference_forward(ctx, resized, state).shape
                except Exception as exc:  # the leading dimension is not free for this contract
                    batch_note = f"the reference refuses {n} rows of case {bcase.name!r}: {unexpected_error(exc)}"
                    break
                compare(f"case {bcase.name!r} with batch {n}", resized, bidx, rng.standard_normal(shape))
            after = stats()
            recompiles = after["traces"] - before["traces"]
            details[f"{compiler}: recompiles for {sizes_said}"] = recompiles
            if recompiles > max_recompiles and not calls["raised"]:
                guards = after["guard_failures"][len(before["guard_failures"]):]
                found.append(f"{compiler} recompiled {recompiles} times for {sizes_said}, more than the "
                             f"{max_recompiles} allowed (`compiled: {{max_recompiles: N}}`)"
                             + (f" (guards: {'; '.join(guards[:3])})" if guards else ""))
        final = stats()
        details[compiler] = {"traces": final["traces"], "graphs": final["graphs"],
                             "graph_breaks": sorted(set(final["breaks"])), "calls_compared": calls["n"]}
        if batch_note:
            details[compiler]["batch"] = f"not checked: {batch_note}"
        problems += found
    if problems:
        raise CheckFailed(problems.text(), **details)
    return details
