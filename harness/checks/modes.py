"""Training versus evaluation: ``modes``.

The flag a layer consults must be the framework's own, so that the normal switch on an
enclosing container reaches it (torch ``.eval()`` on a Sequential, Keras ``training=False``
on the model call). Evaluation is checked exactly; training statistically, with a bound
that holds for any seed and a fixed seed so that the verdict repeats.
"""
from __future__ import annotations

import math

import numpy as np

from .. import inputs as inputs_mod
from .base import CheckFailed


def hoeffding_halfwidth(n: int, false_alarm: float) -> float:
    """t with P(|k/n - p| >= t) <= 2 exp(-2 n t^2) = false_alarm for k ~ Binomial(n, p), any p."""
    return math.sqrt(math.log(2.0 / false_alarm) / (2.0 * n))


def _changed(y, x) -> str | None:
    if y.shape != x.shape:
        return f"shape {list(y.shape)} instead of {list(x.shape)}"
    if y.dtype != x.dtype:
        return f"dtype {y.dtype} instead of {x.dtype}"
    bad = ~((y == x) | (np.isnan(y) & np.isnan(x)))
    if not bad.any():
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} / {x.size} entries changed (first at {first}: {y[first]:.6g} instead of {x[first]:.6g})"


def check_modes(ctx):
    """Eval: the identity, bit for bit. Train (``inverted_dropout``): zero fraction within a
    Hoeffding bound of the rate, survivors scaled by 1 / (1 - rate), a fresh mask per call.
    Both through the framework's switch on a container holding the layer."""
    spec = ctx.contract.modes   # a layer's, stated: layer_conformance.checks.applicable
    adapter, contract = ctx.adapter, ctx.contract
    train = spec.train
    rate = contract.resolve_arg(train.rate)  # a number in (0, 1) or $name of a constructor argument
    false_alarm = float(train.false_alarm)
    x = inputs_mod.make_input(contract, "modes", "input", train.input, ctx.seed)
    if np.any(x == 0):
        raise CheckFailed(f"modes.train.input draws exact zeros, which would read as dropped "
                          f"({contract.location('modes', 'train', 'input')}); draw uniform away from 0")
    container = ctx.adapter.nest(ctx.new_layer())
    problems = []

    def run(training):
        out = adapter.call(container, [x], training=training)
        return ctx.output_numpy(out, f"the output in {'training' if training else 'evaluation'} mode")

    changed = _changed(run(False), x)
    if changed:
        problems.append(f"in evaluation mode, switched on the enclosing container, the layer is not the identity: "
                        f"{changed}; the training flag it consults does not follow the framework's switch")

    saved = adapter.save_globals()  # the check's own seeding must not leak into later checks
    try:
        ctx.adapter.manual_seed(ctx.seed)
        first, second = run(True), run(True)
    finally:
        adapter.restore_globals(saved)
    n = x.size
    half = hoeffding_halfwidth(n, false_alarm)
    details = {"rate": rate, "n": n, "false_alarm": false_alarm, "halfwidth": half,
               "bound": "Hoeffding: P(|zeros/n - rate| >= t) <= 2 exp(-2 n t^2)"}
    for which, y in (("first", first), ("second", second)):
        if y.shape != x.shape:
            problems.append(f"in training mode the output has shape {list(y.shape)}, not {list(x.shape)}")
            break
        dropped = y == 0
        frac = float(dropped.mean())
        details[f"{which}_zero_fraction"] = frac
        if frac == 0:
            problems.append(f"in training mode, switched on the enclosing container, no entry was zeroed "
                            f"(rate {rate}): the training flag did not reach the layer")
            break
        if abs(frac - rate) > half:
            problems.append(f"in training mode {frac:.4f} of {n} entries are zero ({which} call), expected the "
                            f"rate {rate} +- {half:.4f} (Hoeffding bound, false-alarm probability {false_alarm:g})")
        kept = ~dropped
        want = x[kept].astype(np.float64) / (1.0 - rate)
        got = y[kept].astype(np.float64)
        rtol, atol = ctx.tolerance("modes", str(y.dtype))
        off = ~np.isclose(got, want, rtol=rtol, atol=atol)
        if off.any():
            factor = float(np.median(got / x[kept].astype(np.float64)))
            problems.append(f"in training mode the surviving entries are scaled by {factor:.6g}, expected "
                            f"1 / (1 - rate) = {1.0 / (1.0 - rate):.6g} ({int(off.sum())} / {got.size} off)")
        if problems:
            break
    if not problems and np.array_equal(first == 0, second == 0):
        problems.append("two training calls zeroed exactly the same entries: the mask is not drawn afresh per call")
    changed = _changed(run(False), x)
    if changed and not any("evaluation mode" in p for p in problems):
        problems.append(f"after training, switching the container back to evaluation does not reach the layer: "
                        f"{changed}")
    if problems:
        raise CheckFailed("; ".join(problems), **details)
    return details
