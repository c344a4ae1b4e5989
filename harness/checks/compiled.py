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
from ..protocol.autodiff import Gradients
from ..protocol.compile import CompileStats
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


ROUNDING_ULPS = 64  # a compiled value this close to the eager one, at the values' scale, differs by rounding only


def _rounding_apart(got, want) -> bool:
    """Within ROUNDING_ULPS of the dtype at the eager values' largest magnitude: another summation order (XLA's
    fused reductions, a matmul's blocking), which a stated compiled tolerance covers, not a mistake to name."""
    if got is None or want is None or got.shape != want.shape or not np.all(np.isfinite(got)) \
            or not np.all(np.isfinite(want)) or not np.issubdtype(np.asarray(want).dtype, np.inexact):
        return False
    try:
        eps = float(np.finfo(np.asarray(got).dtype).eps)
    except ValueError:   # bfloat16 (ml_dtypes): numpy's finfo does not know it
        return False
    scale = float(np.max(np.abs(want.astype(np.float64)), initial=0.0))
    return scale > 0 and float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) <= \
        ROUNDING_ULPS * eps * scale


def _diagnose(compiler, what, got, want, eager_again, retraced=None, tol=(0.0, 0.0)) -> str:
    """Name the mistake from how the compiled value differs from the eager one (``retraced``: the same call
    traced anew, where the eager one ran op by op; it matches the compiled one within ``tol``, another program)."""
    if got is not None and want is not None and got.shape == want.shape and \
            not np.array_equal(np.isfinite(got), np.isfinite(want)):
        return ""  # a degenerate formula (0/0, sqrt at 0) the compiler rewrites: no Python-side cause to name
    if want is not None and np.any(want) and got is not None and not np.any(got) and "gradient" in what:
        return hint("compiled_backward_unused", compiler=compiler)
    if _rounding_apart(got, want):
        return ""  # the compiler's other order of the same floating-point sums: no Python-side cause to name
    if eager_again is not None and not np.array_equal(eager_again, want, equal_nan=True):
        return hint("compiled_side_effect", compiler=compiler)
    if retraced is not None and retraced.shape == got.shape and np.allclose(retraced, got, rtol=tol[0], atol=tol[1],
                                                                            equal_nan=True):
        return hint("compiled_traced_branch", compiler=compiler)
    return hint("compiled_frozen_state", compiler=compiler)


def check_compiled(ctx):
    from .. import inputs as inputs_mod
    state = ctx.test_state()
    rng = inputs_mod.rng_for(ctx.seed, ctx.contract.name, "compiled")  # one stream for every compiler, in turn
    details, problems = {}, Findings()  # each hint once, after all compilers' problems
    for compiler in ctx.adapter.compilers(ctx.compile_backend):
        run = _CompilerRun(ctx, compiler, state, rng, problems)
        details.update(run.judge())
        problems += run.found
    if problems:
        raise CheckFailed(problems.text(), **details)
    return details


class _CompilerRun:
    """One compiler on its own instance of the layer (compiling may change it: hybridize), compiled once and
    reused for every call, as a user's would be: every case against eager, the first case called again, other
    batch sizes. What is wrong goes to ``found``; the hints to the check's ``Findings``, to be said once."""

    def __init__(self, ctx, compiler: str, state, rng, hints: Findings):
        self.ctx, self.compiler, self.state, self.rng, self.hints = ctx, compiler, state, rng, hints
        self.adapter, self.contract = ctx.adapter, ctx.contract
        self.differentiate = ctx.contract.gradients.declared
        self.eager_layer = ctx.new_layer(state)
        self.layer = ctx.new_layer(state)
        self.mapping = ctx.slot_map(self.layer) if self.layer is not None else {}
        self.compiled = self.adapter.compile(ctx.callable(self.layer), self.layer, compiler)
        self.found: list[str] = []
        self.compared = 0  # compiled calls compared with eager ones
        self.raised = 0    # compiled calls that raised (a raise retraces: no recompile to judge)

    def stats(self) -> CompileStats:
        return self.adapter.compile_stats(self.compiled)

    def judge(self) -> dict:
        """Every part in turn; this compiler's details."""
        self.called_again(*self.every_case())
        details, batch_note = self.other_batches()
        final = self.stats()
        details[self.compiler] = {"traces": final.traces, "graphs": final.graphs,
                                  "graph_breaks": sorted(set(final.breaks)), "calls_compared": self.compared}
        if batch_note:
            details[self.compiler]["batch"] = f"not checked: {batch_note}"
        return details

    def every_case(self):
        """Every case, in evaluation mode, after a training-mode trace where the layer has modes; then whether a
        trace ran, and the graph breaks. Returns the first case's (case, inputs, differentiated, cotangent)."""
        from .common import reference_forward
        ctx, contract, compiler = self.ctx, self.contract, self.compiler
        modes = bool(contract.modes) and self.layer is not None
        first = None
        for n, case in enumerate(contract.cases):
            inputs = ctx.case_inputs(case)
            _, idx, _ = contract.differentiated(case)
            ct = self.rng.standard_normal(reference_forward(ctx, inputs, self.state).shape)  # numpy: no eager run
            if first is None:
                first = (case, inputs, idx, ct)
            self.compare(f"case {case.name!r}", inputs, idx, ct, training_first=modes and n == 0, op_by_op=n == 0)
        after_cases = self.stats()
        if after_cases.traces < 1:
            self.found.append(f"{compiler} compiled nothing: no trace ran, so the layer ran eagerly (the compiler "
                              f"skipped it)")
        if after_cases.breaks and not contract.compiled.allow_graph_breaks:
            reasons = sorted(set(after_cases.breaks))
            self.found.append(f"{compiler} broke the graph {len(after_cases.breaks)} time(s): "
                              f"{'; '.join(reasons)}; the layer is not captured as one graph (a contract may allow "
                              f"breaks with `compiled: {{allow_graph_breaks: reason}}`)")
        return first

    def called_again(self, case, inputs, idx, ct):
        """The same call again: a compiled program must be reused."""
        before = self.stats()
        self.compare(f"case {case.name!r} called again", inputs, idx, ct)
        again = self.stats()
        # a call that raised traces again on the next call whatever the layer does: that is the raise, said above
        if again.traces > before.traces and not self.raised:
            guards = again.guard_failures[len(before.guard_failures):]
            self.found.append(f"{self.compiler} recompiled on a second call with identical inputs"
                              + (f" (guard failed: {'; '.join(guards)})" if guards else "")
                              + ": the compiled program depends on Python state that changes from call to call "
                                "(a global or attribute the forward or backward reads, a counter); it recompiles "
                                "on every call")

    def other_batches(self) -> tuple[dict, str | None]:
        """Other batch sizes: at most ``max_recompiles`` recompiles (one per new size unless the contract says).
        Returns (details, why the batch sizes were not checked, or None)."""
        from .common import reference_forward
        ctx, contract, spec = self.ctx, self.contract, self.contract.compiled
        extra_rows = (1,) if self.adapter.retraces_per_shape else (1, 2)  # the new batch sizes: n0 + each
        max_recompiles = len(extra_rows) if spec.max_recompiles is None else spec.max_recompiles
        sizes_said = "one new batch size" if len(extra_rows) == 1 else f"{len(extra_rows)} new batch sizes"
        bcase = _batch_case(ctx)
        if bcase is None:
            return {}, "no case has a literal leading batch dimension shared by its inputs"
        batch_note = None
        binputs = ctx.case_inputs(bcase)
        _, bidx, _ = contract.differentiated(bcase)
        n0 = binputs[0].shape[0]
        before = self.stats()
        for n in (n0 + k for k in extra_rows):
            resized = _resized(binputs, n)
            try:
                shape = reference_forward(ctx, resized, self.state).shape
            except Exception as exc:  # the leading dimension is not free for this contract
                batch_note = f"the reference refuses {n} rows of case {bcase.name!r}: {unexpected_error(exc)}"
                break
            self.compare(f"case {bcase.name!r} with batch {n}", resized, bidx, self.rng.standard_normal(shape))
        after = self.stats()
        recompiles = after.traces - before.traces
        if recompiles > max_recompiles and not self.raised:
            guards = after.guard_failures[len(before.guard_failures):]
            self.found.append(f"{self.compiler} recompiled {recompiles} times for {sizes_said}, more than the "
                              f"{max_recompiles} allowed (`compiled: {{max_recompiles: N}}`)"
                              + (f" (guards: {'; '.join(guards[:3])})" if guards else ""))
        return {f"{self.compiler}: recompiles for {sizes_said}": recompiles}, batch_note

    def compare(self, label, inputs, idx, ct, training_first=False, op_by_op=False):
        """One compiled call against one eager call; returns the compiled output (numpy). ``op_by_op``: the
        eager call without any compiler even where the adapter's own calls trace (JAX), for the first case
        (a layer that tells a tracer from an array is caught there); the others run the Python eagerly,
        every call, as the adapter's calls do, and so cost a compile per program, not per primitive."""
        adapter, ctx, n = self.adapter, self.ctx, len(inputs)
        self.compared += 1
        try:
            if training_first:  # traced in training mode first: evaluation must still be honoured
                adapter.compiled_call(self.compiled, inputs, training=True)
            if self.differentiate and idx:
                c = adapter.compiled_vjp(self.compiled, self.layer, inputs, idx, ct)
            else:  # the output alone, in the vjp's reply type
                c = Gradients(output=adapter.compiled_call(self.compiled, inputs), inputs=(None,) * n, state={})
        except (CheckSkipped, CheckFailed):
            raise
        except Exception as exc:
            text = unexpected_error(exc)
            why = hint("compiled_reads_value") if any(k in text for k in _VALUE_ERRORS) or "Symbol" in text else ""
            self.raised += 1
            self.found.append(f"{label}: under {self.compiler} the layer raises {text}.")
            self.hints.say(why)
            return None
        if self.differentiate and idx:
            e = adapter.eager_vjp(ctx.callable(self.eager_layer), self.eager_layer, inputs, idx, ct, op_by_op=op_by_op)
        else:
            e = Gradients(output=adapter.eager_call(ctx.callable(self.eager_layer), inputs, op_by_op=op_by_op),
                          inputs=(None,) * n, state={})
        got = _np(adapter, c.output)
        for what, g, w in self._pairs(got, _np(adapter, e.output), idx, c.inputs, e.inputs, c.state, e.state, n):
            self._compare_one(label, what, g, w, inputs, op_by_op)
        return got

    def _pairs(self, got, want, idx, c_in, e_in, c_state, e_state, n) -> list:
        """(what, compiled, eager) as numpy: the output, each differentiated input's gradient, each slot's."""
        adapter, contract, mapping = self.adapter, self.contract, self.mapping
        pairs = [("output", got, want)]
        names = list(contract.cases[0].inputs) if len(contract.cases[0].inputs) == n else [str(i) for i in range(n)]
        pairs += [(f"gradient for input {names[i]!r}", _np(adapter, c_in[i]), _np(adapter, e_in[i])) for i in idx]
        if self.differentiate and self.layer is not None:
            slots = [s for s in contract.differentiated(contract.cases[0])[2] if s in mapping]
            pairs += [(f"gradient for slot {s!r}", _np(adapter, c_state.get(mapping[s])),
                       _np(adapter, e_state.get(mapping[s]))) for s in slots]
        return pairs

    def _compare_one(self, label, what, g, w, inputs, op_by_op):
        compiler, adapter, ctx = self.compiler, self.adapter, self.ctx
        if g is None and w is None:
            return
        if g is None or w is None:
            self.found.append(f"{label}: the {what} is {'None' if g is None else 'present'} under {compiler} "
                              f"but {'None' if w is None else 'present'} eagerly")
            return
        if g.shape != w.shape or g.dtype != w.dtype:
            self.found.append(f"{label}: the {what} under {compiler} has shape {list(g.shape)} and dtype "
                              f"{g.dtype}, eagerly {list(w.shape)} and {w.dtype}")
            return
        rtol, atol = ctx.tolerance("compiled", str(w.dtype))
        diff = describe_mismatch(g, w, rtol, atol, what=f"{label}: {what} under {compiler} vs eager")
        if diff:
            again = retraced = None
            if what == "output":
                again = _np(adapter, adapter.eager_call(ctx.callable(self.eager_layer), inputs, op_by_op=op_by_op))
                if op_by_op:  # where the adapter's calls do not trace, this is the eager value again
                    retraced = _np(adapter, adapter.eager_call(ctx.callable(self.eager_layer), inputs,
                                                               op_by_op=False))
            self.found.append(diff)
            self.hints.say(_diagnose(compiler, what, g, w, again, retraced, (rtol, atol)))
