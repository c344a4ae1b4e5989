"""The ``export`` check: the whole layer saved in the framework's own format and loaded in a fresh
process, as a deployment sees it.

Every format of the framework (or those the contract's ``export: {formats: [...]}`` names) is saved
by the executor holding the layer, then loaded in one new executor per check that never imported
the code under test (it imports the implementation's module only where the format refers to its
Python classes, as a deployment does). Outputs must be bit-equal on every case; gradients (inputs
and trainable state) must match the original's within the ``export`` tolerance wherever the format
keeps the backward. What a format cannot hold is recorded as skipped with the framework's reason.
"""
from __future__ import annotations

import contextlib

import queue
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..dtypes import is_floating, is_inexact
from .. import inputs as inputs_mod
from ..compare import describe_mismatch, tolerance
from ..errors import missing_dependency
from .base import CheckFailed, CheckSkipped, unexpected_error
from ..protocol.export import ExportNotes
from ..record import NotApplicable
from .mistakes import HINTS, hint

# What usually breaks each format, in the framework's words (said after the framework's own error): the
# texts are in the hint registry (mistakes.HINTS, ids export_save:<format> and so on)
_KERAS_MISTAKES = (  # the classic Keras mistakes, told apart by what from_config or loading raised
    ("unexpected keyword argument", "keras_kwargs"),
    ("required positional argument", "keras_config_args"),
    ("variables", "keras_build"),
    ("get_config", "keras_config"),
)


def _format_hint(kind: str, fmt: str) -> str:
    key = f"{kind}:{fmt}"
    return hint(key) if key in HINTS else ""


def _load_hint(fmt: str, text: str) -> str:
    if fmt == "keras":
        specific = next((hint_id for key, hint_id in _KERAS_MISTAKES if key in text), None)
        if specific:
            return hint(specific)
    return _format_hint("export_load", fmt)


def _formats_wanted(ctx):
    return ctx.contract.export.formats


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a, b, equal_nan=is_inexact(a.dtype))


def _grads(adapter, fn, layer, inputs, idx, cotangent):
    """(input gradients by index, state gradients by name) as numpy (None where absent)."""
    got = adapter.vjp(fn, layer, inputs, idx, cotangent)
    conv = lambda g: None if g is None else adapter.numpy(g)  # noqa: E731
    return {i: conv(got.inputs[i]) for i in idx}, {k: conv(g) for k, g in (got.state or {}).items()}


def check_export(ctx):
    """Saved in each of the framework's formats and loaded in a fresh process: bit-equal outputs and the
    same gradients on every case, wherever the format keeps them."""
    adapter, contract = ctx.adapter, ctx.contract
    wanted = _formats_wanted(ctx)
    state = ctx.test_state()
    layer = ctx.new_layer(state)
    obj = ctx.callable(layer)
    formats = adapter.export_formats(obj if layer is None else layer)
    if wanted is not None:
        left_out = [f for f in formats if f not in wanted]
        formats = [f for f in formats if f in wanted]
        if not formats:
            raise NotApplicable(f"the contract limits export to {', '.join(wanted)}, none of which is a "
                                f"{adapter.name} format (left out: {', '.join(left_out)})", code="contract_cases")

    cases = [(case.name, ctx.case_inputs(case), case) for case in contract.cases]
    examples, seen = [], set()
    for _, inputs, _ in cases:  # one traced signature per distinct input shapes and dtypes
        key = tuple((a.shape, a.dtype.str) for a in inputs)
        if key not in seen:
            seen.add(key)
            examples.append(inputs)

    workdir = tempfile.mkdtemp(prefix="conformance-export-")
    # The two processes work side by side: the fresh one (forked, then loading each format as soon as it is
    # saved and running every case) on a thread, while this one saves the next format and computes the
    # original's outputs and gradients. The thread only runs the loaded layer; every comparison is made here.
    fresh_cm = ctx.fresh_adapter()
    saved_formats: queue.SimpleQueue = queue.SimpleQueue()
    fresh_side = _FreshSide(ctx, fresh_cm, saved_formats, workdir, cases, examples)
    pool = ThreadPoolExecutor(1)
    loading = pool.submit(fresh_side.run)
    try:
        saved, outcome, problems = {}, {}, []
        try:
            for fmt in formats:
                try:
                    saved[fmt] = adapter.export_save(obj if layer is None else layer, fmt, examples,
                                                     f"{workdir}/{fmt}")
                    saved_formats.put((fmt, saved[fmt]))
                except CheckSkipped:
                    raise
                except Exception as exc:
                    if isinstance(exc, NotApplicable):
                        outcome[fmt] = f"skipped: {exc}"
                        continue
                    if missing_dependency(exc):
                        raise  # the environment's problem, not the format's: a usage error (layer_conformance.runner)
                    problems.append(_said(f"saving as {fmt} failed: {_text(exc)}", _format_hint("export_save", fmt)))
                    outcome[fmt] = "failed"
        finally:
            saved_formats.put(None)  # nothing more to load
        if saved:
            original = _original(ctx, obj, layer, cases, saved)
            ran = loading.result()
            for fmt, notes in saved.items():
                outcome[fmt] = _compare_format(ctx, fmt, notes, ran[fmt], cases, original, problems)
    except BaseException:
        fresh_side.stop()  # a thread still waiting on the fresh process ends now
        raise
    finally:
        pool.shutdown(wait=True)
        fresh_side.close()  # the fresh process ends with the check
        shutil.rmtree(workdir, ignore_errors=True)
    details = {"formats": outcome, "fresh_process": True}
    if problems:
        raise CheckFailed("; ".join(problems), **details)
    if all(v.startswith("skipped") for v in outcome.values()):
        raise NotApplicable("; ".join(f"{f}: {v[len('skipped: '):]}" for f, v in outcome.items()), code="parts")
    return details


def _original(ctx, obj, layer, cases, saved: dict[str, ExportNotes]) -> list:
    """The original's outputs and gradients, once per case, after saving: the saved layer is the one these calls
    start from (a call may advance its state: an RNG counter, running statistics). Per case: (output, gradients
    or None, {format: the output of the traced program it holds})."""
    adapter, original = ctx.adapter, []
    for name, inputs, case in cases:
        out = ctx.output_numpy(ctx.run(layer, inputs))
        run = _differentiation(ctx, name, case, out)
        original.append((out, _grads(adapter, obj, layer, inputs, run[0], run[1]) if run else None, {}))
    # a format holding a traced program (a SavedModel's graph) is promised bit-equality to that program run in
    # this process
    for fmt, notes in saved.items():
        if notes.runs_as is not None:
            for (_, inputs, _), (_, _, traced) in zip(cases, original):
                traced[fmt] = ctx.output_numpy(adapter.call(notes.runs_as, inputs))
    return original


def _differentiation(ctx, name, case, out):
    """(differentiated inputs, cotangent) for a case whose output is ``out``, or None where nothing is
    differentiated. The cotangent is drawn from the case's own stream, so that the original and the loaded
    layer, each from its own output, draw the same one."""
    contract = ctx.contract
    if not contract.gradients.declared or not is_floating(out.dtype):
        return None
    idx = contract.differentiated(case)[1]
    if not idx and not contract.trainable:
        return None
    rng = inputs_mod.rng_for(ctx.seed, contract.name, "export", name)
    return idx, rng.standard_normal(out.shape).astype(out.dtype)


def _fresh_seed(seed: int) -> int:
    """A seed for the fresh process that the checks never give the layer's executor."""
    return (seed + 0x5EED) % 2 ** 31


class _FreshSide:
    """The fresh process's part of the check, on a thread: fork it, then load each saved format and run
    every case (output, then gradients). What it gives is compared by the check; what it raised is kept,
    as the format's or the case's result."""

    def __init__(self, ctx, fresh_cm, saved_formats, workdir, cases, examples):
        self.ctx, self.fresh_cm, self.saved_formats = ctx, fresh_cm, saved_formats
        self.workdir, self.cases, self.examples = workdir, cases, examples
        self.fresh = None
        self.stopped = False

    def run(self) -> dict:
        self.fresh = self.fresh_cm.__enter__()
        # State a layer keeps out of its saved form (a random buffer made at construction) must differ in the
        # fresh process. Forked from the same zygote as the layer's own executor, it would draw the same random
        # numbers and hide that: its generator starts elsewhere.
        with contextlib.suppress(Exception):
            self.fresh.manual_seed(_fresh_seed(self.ctx.seed))
        ran = {}
        while (item := self.saved_formats.get()) is not None and not self.stopped:
            fmt, notes = item
            ran[fmt] = self._format(fmt, f"{self.workdir}/{fmt}")
        return ran

    def _format(self, fmt, path):
        """("skipped" | "load failed", text) or ("ran", fn, loaded, [per case: (output, gradients, error)])."""
        ctx, fresh = self.ctx, self.fresh
        try:
            fn, loaded = fresh.export_load(fmt, path, ctx.impl_spec, ctx.constructor_args(), self.examples)
        except Exception as exc:
            return ("skipped" if isinstance(exc, NotApplicable) else "load failed", exc)
        runs = []
        for name, inputs, case in self.cases:
            try:
                got = fresh.numpy(fresh.call(fn, inputs))
            except Exception as exc:
                runs.append((None, None, f"the loaded layer raised {_text(exc)}"))
                break
            grads = None
            run = _differentiation(ctx, name, case, got)
            if run:
                try:
                    grads = _grads(fresh, fn, loaded, inputs, run[0], run[1])
                except Exception as exc:
                    runs.append((got, None, f"differentiating the loaded layer raised {_text(exc)}"))
                    break
            runs.append((got, grads, None))
        return ("ran", loaded is not None, runs)

    def stop(self):
        """Stop early (the check failed in this process): the fresh process is killed, so that a request the
        thread waits on returns now."""
        self.stopped = True
        if self.fresh is not None:
            self.fresh._executor.kill()

    def close(self):
        if self.fresh is not None:
            self.fresh_cm.__exit__(None, None, None)


def _text(exc) -> str:
    """The error as raised where it happened (in an executor: its own text, with the place)."""
    return getattr(exc, "remote_text", None) or unexpected_error(exc)


def _said(message: str, why: str) -> str:
    return f"{message} ({why})" if why else message


def _compare_format(ctx, fmt, notes: ExportNotes, ran, cases, original, problems) -> str:
    """Compare what the fresh process gave for one format with the original; returns the format's outcome
    and appends its problems."""
    if ran[0] == "skipped":
        return f"skipped: {ran[1]}"
    if ran[0] == "load failed":
        if missing_dependency(ran[1]):
            raise ran[1]  # the environment's problem, not the format's: a usage error (layer_conformance.runner)
        text = _text(ran[1])
        problems.append(_said(f"{fmt}: loading in a fresh process failed: {text}", _load_hint(fmt, text)))
        return "failed"
    _, has_state, runs = ran
    kept = notes.gradients
    traced_program = notes.runs_as is not None
    dropped, eager_gap = [], 0.0
    for (name, inputs, _), (out, grads, traced), (got, g_loaded, error) in zip(cases, original, runs):
        if traced_program:
            # bit-equal is promised to the traced program run in the original process; how far that is from
            # eager execution is recorded, not failed
            eager, out = out, traced[fmt]
            if out.shape == eager.shape and is_inexact(out.dtype):
                both = np.isfinite(out) & np.isfinite(eager)  # -inf where both mask is no gap
                wide = np.result_type(out.dtype, np.float64)  # complex stays complex: its gap is a modulus
                eager_gap = max(eager_gap, float(np.max(np.abs(out[both].astype(wide) - eager[both]),
                                                        initial=0.0)))
        if got is None:
            problems.append(f"{fmt}: case {name!r}: {error}")
            return "failed"
        if not _same(got, out):
            diff = describe_mismatch(got, out, 0.0, 0.0, what="outputs") if got.shape == out.shape else \
                f"shape {list(got.shape)} {got.dtype}, original {list(out.shape)} {out.dtype}"
            against = (notes.runs_as_what or "the original") if traced_program else "the original"
            problems.append(_said(f"{fmt}: case {name!r}: loaded in a fresh process, the layer is not "
                                  f"bit-equal to {against}: {diff}", _format_hint("export_value", fmt)))
            return "failed"
        if error is not None:
            problems.append(f"{fmt}: case {name!r}: {error}")
            return "failed"
        if grads is None:
            continue
        bad = _compare_grads(ctx, grads, *g_loaded, has_state, inputs, name, fmt)
        if bad and kept != "kept":
            dropped.append(bad[0])  # the format is known not to keep this backward: measured, recorded
            continue
        if bad:
            problems.extend(bad)
            return "failed"
    if dropped:  # the values were compared; the backward the format cannot hold is recorded, not failed
        return f"passed (values); gradients skipped: {kept} (measured: {dropped[0]})"
    extra = [f"bit-equal to {notes.runs_as_what or 'the saved program run in the original process'}; "
             f"eager execution differs by up to {eager_gap:.3g}"] if eager_gap else []
    if notes.without_option:
        extra.append(f"without experimental_custom_gradients: {notes.without_option}")
    return "passed" + (f" ({'; '.join(extra)})" if extra else "")


def _compare_grads(ctx, want, g_in, g_state, has_state, inputs, case, fmt) -> list[str]:
    w_in, w_state = want
    names = list(next(c for c in ctx.contract.cases if c.name == case).inputs)
    out = []
    pairs = [(f"input {names[i]!r}", w_in[i], g_in.get(i)) for i in w_in]
    if has_state:
        for k, v in w_state.items():
            # the loaded object's name for the slot: the same, or the same with a prefix (a SymbolBlock's
            # global parameter names); a state it does not name at all is not compared
            match = [n for n in g_state if n == k] or [n for n in g_state if n.endswith(("_" + k, "." + k, "/" + k))]
            match = [n for n in match if g_state[n] is not None] if len(match) > 1 else match
            if len(match) == 1:
                pairs.append((f"state {k!r}", v, g_state[match[0]]))
    for label, a, b in pairs:
        if a is None:
            continue
        if b is None:
            out.append(f"{fmt}: case {case!r}: the loaded layer gives no gradient for {label} (the original does)")
            continue
        rtol, atol = tolerance(ctx.contract, "export", str(np.asarray(a).dtype))
        diff = describe_mismatch(b, a, rtol, atol, what=f"gradient of {label}")
        if diff:
            out.append(f"{fmt}: case {case!r}: after loading in a fresh process the {diff}")
    return out
