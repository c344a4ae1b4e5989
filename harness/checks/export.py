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

import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..dtypes import is_floating, is_inexact
from .. import inputs as inputs_mod
from ..compare import describe_mismatch, tolerance
from .base import CheckFailed, CheckSkipped, unexpected_error
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
    spec = ctx.contract.export
    if spec.get("not_applicable"):
        raise CheckSkipped(spec["not_applicable"], not_applicable=True)
    return spec.get("formats")


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a, b, equal_nan=is_inexact(a.dtype))


def _grads(adapter, fn, layer, inputs, idx, cotangent):
    """(input gradients by index, state gradients by name) as numpy (None where absent)."""
    _, g_in, g_state = adapter.vjp(fn, layer, inputs, idx, cotangent)
    conv = lambda g: None if g is None else adapter.numpy(g)  # noqa: E731
    return {i: conv(g_in[i]) for i in idx}, {k: conv(g) for k, g in (g_state or {}).items()}


def check_export(ctx):
    """Saved in each of the framework's formats and loaded in a fresh process: bit-equal outputs and the
    same gradients on every case, wherever the format keeps them."""
    adapter, contract = ctx.adapter, ctx.contract
    wanted = _formats_wanted(ctx)
    state = inputs_mod.test_state(contract)
    layer = ctx.new_layer(state)
    obj = ctx.callable(layer)
    formats = adapter.export_formats(obj if layer is None else layer)
    if wanted is not None:
        left_out = [f for f in formats if f not in wanted]
        formats = [f for f in formats if f in wanted]
        if not formats:
            raise CheckSkipped(f"the contract limits export to {', '.join(wanted)}, none of which is a "
                               f"{adapter.name} format (left out: {', '.join(left_out)})", not_applicable=True)

    cases = [(case["name"], ctx.case_inputs(case)) for case in contract.cases]
    examples, seen = [], set()
    for _, inputs in cases:  # one traced signature per distinct input shapes and dtypes
        key = tuple((a.shape, a.dtype.str) for a in inputs)
        if key not in seen:
            seen.add(key)
            examples.append(inputs)

    workdir = tempfile.mkdtemp(prefix="conformance-export-")
    # the fresh process imports its framework (seconds) while this one saves: one thread starts it
    fresh_cm = ctx.fresh_adapter()
    pool = ThreadPoolExecutor(1)
    starting = pool.submit(fresh_cm.__enter__)
    try:
        saved, outcome, problems = {}, {}, []
        for fmt in formats:
            try:
                saved[fmt] = adapter.export_save(obj if layer is None else layer, fmt, examples, f"{workdir}/{fmt}")
            except CheckSkipped:
                raise
            except Exception as exc:
                if type(exc).__name__ == "Unsupported":
                    outcome[fmt] = f"skipped: {exc}"
                    continue
                problems.append(_said(f"saving as {fmt} failed: {_text(exc)}", _format_hint("export_save", fmt)))
                outcome[fmt] = "failed"
        if not saved:
            raise _NothingSaved
        # the original's outputs and gradients, once per case, after saving: the saved layer is the one
        # these calls start from (a call may advance its state: an RNG counter, running statistics)
        differentiate = contract.gradients.get("mode", "true") != "none"
        rng = inputs_mod.rng_for(ctx.seed, contract.name, "export")
        original = []
        for (name, inputs), case in zip(cases, contract.cases):
            out = ctx.output_numpy(ctx.run(layer, inputs))
            idx = contract.differentiated(case)[1] if differentiate else []
            ct = rng.standard_normal(out.shape).astype(out.dtype) if differentiate and (idx or contract.trainable) \
                else None
            grads = _grads(adapter, obj, layer, inputs, idx, ct) if ct is not None and is_floating(
                out.dtype) else None
            original.append((out, idx, ct, grads))
        fresh = starting.result()
        for fmt, notes in saved.items():
            outcome[fmt] = _check_format(ctx, fresh, fmt, notes, f"{workdir}/{fmt}", cases, original,
                                         examples, problems)
    except _NothingSaved:
        pass
    finally:
        pool.shutdown(wait=True)
        if starting.exception() is None:
            fresh_cm.__exit__(None, None, None)  # the fresh process ends with the check
        shutil.rmtree(workdir, ignore_errors=True)
    details = {"formats": outcome, "fresh_process": True}
    if problems:
        raise CheckFailed("; ".join(problems), **details)
    if all(v.startswith("skipped") for v in outcome.values()):
        raise CheckSkipped("; ".join(f"{f}: {v[len('skipped: '):]}" for f, v in outcome.items()), not_applicable=True)
    return details


class _NothingSaved(Exception):
    """No format saved: nothing to compare (each format's outcome says why)."""


def _text(exc) -> str:
    """The error as raised where it happened (in an executor: its own text, with the place)."""
    return getattr(exc, "remote_text", None) or unexpected_error(exc)


def _said(message: str, why: str) -> str:
    return f"{message} ({why})" if why else message


def _check_format(ctx, fresh, fmt, notes, path, cases, original, examples, problems) -> str:
    """Load one saved format in the fresh process and compare; returns its outcome, appends problems."""
    try:
        fn, loaded = fresh.export_load(fmt, path, ctx.impl_spec, ctx.contract.constructor, examples)
    except Exception as exc:
        if type(exc).__name__ == "Unsupported":
            return f"skipped: {exc}"
        text = _text(exc)
        problems.append(_said(f"{fmt}: loading in a fresh process failed: {text}", _load_hint(fmt, text)))
        return "failed"
    kept = notes.get("gradients", "kept")
    runs_as = notes.get("runs_as")
    dropped, eager_gap = [], 0.0
    for (name, inputs), (out, idx, ct, grads) in zip(cases, original):
        if runs_as is not None:
            # the format holds a traced program (a SavedModel's graph): bit-equal is promised to that program
            # run in the original process; how far it is from eager execution is recorded, not failed
            eager = out
            out = ctx.output_numpy(ctx.adapter.call(runs_as, inputs))
            if out.shape == eager.shape and is_inexact(out.dtype):
                both = np.isfinite(out) & np.isfinite(eager)  # -inf where both mask is no gap
                eager_gap = max(eager_gap, float(np.max(np.abs(out[both].astype(np.float64) - eager[both]),
                                                        initial=0.0)))
        try:
            got = fresh.numpy(fresh.call(fn, inputs))
        except Exception as exc:
            problems.append(f"{fmt}: case {name!r}: the loaded layer raised {_text(exc)}")
            return "failed"
        if not _same(got, out):
            diff = describe_mismatch(got, out, 0.0, 0.0, what="outputs") if got.shape == out.shape else \
                f"shape {list(got.shape)} {got.dtype}, original {list(out.shape)} {out.dtype}"
            against = notes.get("runs_as_what", "the original") if runs_as is not None else "the original"
            problems.append(_said(f"{fmt}: case {name!r}: loaded in a fresh process, the layer is not "
                                  f"bit-equal to {against}: {diff}", _format_hint("export_value", fmt)))
            return "failed"
        if grads is None:
            continue
        try:
            g_in, g_state = _grads(fresh, fn, loaded, inputs, idx, ct)
        except Exception as exc:
            problems.append(f"{fmt}: case {name!r}: differentiating the loaded layer raised {_text(exc)}")
            return "failed"
        bad = _compare_grads(ctx, grads, g_in, g_state, loaded is not None, inputs, name, fmt)
        if bad and kept != "kept":
            dropped.append(bad[0])  # the format is known not to keep this backward: measured, recorded
            continue
        if bad:
            problems.extend(bad)
            return "failed"
    if dropped:  # the values were compared; the backward the format cannot hold is recorded, not failed
        return f"passed (values); gradients skipped: {kept} (measured: {dropped[0]})"
    extra = [f"bit-equal to {notes.get('runs_as_what', 'the saved program run in the original process')}; "
             f"eager execution differs by up to {eager_gap:.3g}"] if eager_gap else []
    if notes.get("without_option"):
        extra.append(f"without experimental_custom_gradients: {notes['without_option']}")
    return "passed" + (f" ({'; '.join(extra)})" if extra else "")


def _compare_grads(ctx, want, g_in, g_state, has_state, inputs, case, fmt) -> list[str]:
    w_in, w_state = want
    names = list(next(c for c in ctx.contract.cases if c["name"] == case)["inputs"])
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
