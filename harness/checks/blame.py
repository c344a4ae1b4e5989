"""One mistake, one failing check: which check names a mistake, and which others it blocks.

A layer whose state is registered wrongly (a slot held as a plain attribute, a mask registered as
trainable, a buffer left out of the saved state) is named by ``parameters`` or ``buffers``. Every
other check first runs on what it can (``CheckContext.layer_at`` leaves a slot it cannot set at its
initial value and compares with the reference there); where it still fails, its failure is a
symptom of that mistake, and it is reported as blocked by the check that names it. Likewise a check
derived from the outputs (``native``, ``gradients``...) is blocked by ``values`` when the outputs
themselves are wrong.

A check that runs once per dtype (``PER_DTYPE``) and fails in a dtype other than the cases' own is a
symptom of the same check's failure in the own dtype when it fails there too, in the same way (wrong
numbers in both, or the same exception): it is reported as blocked by that check, or by what blocks that
check, in the own dtype. Only a failure the own dtype does not have (a precision loss, a promoted output,
an op without a kernel in the dtype) is the dtype's own.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from .base import CheckBlocked, CheckFailed, CheckSkipped
# what a check's verdict rests on, tried in this order where the check itself fails, and what a failure of
# each such check says in the message of a check it blocks: declared with each check (``check_catalog.CATALOG``)
from ..check_catalog import BLOCKING_REASONS, PREREQUISITES


@dataclass(frozen=True)
class Finding:
    check: str    # the check that names it
    reason: str   # short, e.g. "'gain' is untracked"


def state_findings(ctx) -> list[Finding]:
    """Registration mistakes in a fresh layer, each with the check that reports it (the same conditions
    as ``parameters`` and ``buffers``)."""
    if ctx.is_function:
        return []
    from .common import untracked_for
    adapter, contract = ctx.adapter, ctx.contract
    layer = ctx.new_layer()
    trainable, non_trainable = adapter.trainable(layer), adapter.non_trainable(layer)
    untracked = adapter.untracked(layer)
    mapping = ctx.slot_map(layer)
    out: list[Finding] = []
    named: set = set()
    for slot, spec in contract.trainable.items():
        name = mapping.get(slot)
        if name in trainable:
            out += _shape_finding("parameters", slot, contract.shape(spec.shape), trainable[name], name)
            continue
        loose = untracked_for(untracked, slot, contract.shape(spec.shape))
        named.update(loose)
        if loose:
            out.append(Finding("parameters", f"{slot!r} is untracked"))
        elif name is not None:
            out.append(Finding("parameters", f"{slot!r} is registered as non-trainable"))
        else:
            out.append(Finding("parameters", f"{slot!r} is missing"))
    buffers_run = bool(contract.non_trainable) and not contract.skip_reason("buffers")
    saved = None
    for slot, spec in contract.non_trainable.items():
        name = mapping.get(slot)
        owner = "buffers" if buffers_run else "parameters"
        if name in trainable:
            out.append(Finding(owner, f"{slot!r} is registered as trainable"))
            continue
        if name in non_trainable:
            out += _shape_finding(owner, slot, contract.shape(spec.shape), non_trainable[name], name)
        if name not in non_trainable:
            loose = untracked_for(untracked, slot, contract.shape(spec.shape))
            if buffers_run:
                named.update(loose)
                out.append(Finding("buffers", f"{slot!r} is {'untracked' if loose else 'missing'}"))
            continue
        if buffers_run:
            saved = adapter.serialized_state(layer) if saved is None else saved
            if name not in saved:
                out.append(Finding("buffers", f"{slot!r} is not in the saved state"))
    for path in untracked:
        if path not in named and not any(path in f.reason for f in out):
            out.append(Finding("parameters", f"{path!r} is an untracked tensor attribute"))
    return out


def _shape_finding(check: str, slot: str, shape: tuple, value, name) -> list[Finding]:
    """A registered slot of another shape than the contract's (through the state map's chain of transforms, where
    ``name`` carries one): no state can be set into it, so every check that sets state fails on it (the
    framework's own size error); ``check`` names the mistake."""
    got = tuple(getattr(name, "slot_shape", None) or getattr(value, "shape", shape))
    return [] if got == tuple(shape) else [Finding(check, f"{slot!r} has shape {list(got)}, expected {list(shape)}")]


# batching's words where one example changed moved another's output: the layer mixes examples, and its wrong
# values are that mistake's symptom (a NaN or a wrong type fails batching too, but is values' own)
_MIXES = "was perturbed"
# a compiled program's output or gradient that is not finite (compare.describe_mismatch's words)
_NOT_FINITE = re.compile(r"\bnot finite\b|\bNaN\b|\binf\b", re.IGNORECASE)


def writes_input(ctx) -> str | None:
    """"the call writes into its input 'x'" where the layer changes an input in place though the contract does not
    declare it (aliasing's own probe, forward only), else None: the mistake that aliasing names."""
    from .applicable import contract_says
    contract, adapter = ctx.contract, ctx.adapter
    if (adapter.immutable_arrays or contract.aliasing.in_place or contract_says(contract, "aliasing", adapter.name)
            or not adapter.implements("input_changes")):
        return None
    case = contract.cases[0]
    names = list(case.inputs)
    try:
        layer = ctx.layer_at(ctx.test_state())[0]
        seen = adapter.input_changes(ctx.callable(layer), layer, ctx.case_inputs(case), [], None)
    except Exception:   # no evidence either way
        return None
    changed = sorted(set(seen.forward) | set(seen.versions or ()))
    return f"the call writes into its input {', '.join(repr(names[k]) for k in changed)}" if changed else None


# what a dtype can bring about on its own, named in a failure: an output or gradient in another dtype, or of
# another shape (the checks' wording: "dtype float32, expected float16", "shape [4, 9], expected [4, 8]")
_DTYPE_PROBLEM = re.compile(r"\bdtype \w+, expected \w+")
_SHAPE_PROBLEM = re.compile(r"\bshape \[[^\]]*\], expected \[")


def failure_kind(exc: BaseException) -> frozenset:
    """How a check failed, to tell whether two dtypes fail the same way: the exception the layer raised,
    or for a failed comparison the dtype and shape problems it names, else wrong numbers."""
    if not isinstance(exc, CheckFailed):
        return frozenset({getattr(exc, "type_name", None) or type(exc).__name__})
    kinds = {kind for kind, problem in (("dtype", _DTYPE_PROBLEM), ("shape", _SHAPE_PROBLEM))
             if problem.search(exc.message)}
    return frozenset(kinds or {"numbers"})


def _failure(ctx, check: str) -> BaseException | None:
    """``check``'s failure in ``ctx`` (CheckFailed, or what the layer raised), None where it does not fail."""
    from . import CHECKS
    from .applicable import contract_says
    from ..record import NotApplicable
    if contract_says(ctx.contract, check, ctx.adapter.name):  # n/a or skipped by the contract
        return None
    try:
        CHECKS[check](ctx)
    except (CheckSkipped, CheckBlocked, NotApplicable):
        return None
    except Exception as exc:
        return None if getattr(exc, "origin", None) == "reference" else exc
    return None


def own_dtype_context(ctx):
    """``ctx`` in the cases' own dtype, or None where it is there already."""
    contract = ctx.contract
    if ctx.dtype is None or contract.viewed is None:
        return None
    return dataclasses.replace(ctx, contract=contract.viewed.for_dtype(None), dtype=None, notes=list(ctx.notes))


def _blocked_in_own_dtype(ctx, check: str, exc: BaseException, symptom: str) -> CheckBlocked | None:
    """Where ``check`` fails the same way in the cases' own dtype: blocked by it there (or by what blocks it
    there), the reason naming that dtype. The check is run there afresh, so the verdict does not depend
    on which target runs first (under pytest-xdist the own dtype's may run on another worker)."""
    from . import PER_DTYPE
    own = own_dtype_context(ctx) if check in PER_DTYPE else None
    if own is None:
        return None
    there = _failure(own, check)
    if there is None or not failure_kind(exc) <= failure_kind(there):
        return None
    root = blocker_for(own, check, there)
    return CheckBlocked(root.by if root else check, own.contract.default_dtype, symptom, in_own_dtype=True)


def blocker_for(ctx, check: str, exc: BaseException) -> CheckBlocked | None:
    """The CheckBlocked that ``check``'s failure ``exc`` becomes, or None (it fails in its own right)."""
    from ..errors import unexpected_error
    symptom = exc.message if isinstance(exc, CheckFailed) else unexpected_error(exc)
    try:
        findings = [f for f in state_findings(ctx) if f.check != check and not ctx.contract.skip_reason(f.check)]
    except (CheckSkipped, CheckFailed):
        findings = []
    except Exception as built:  # a fresh layer cannot be built or read: ``parameters`` (which builds one) says so
        from ..record import NotApplicable   # (not `as exc`: Python unbinds that name after the block)
        findings = [] if isinstance(built, NotApplicable) or ctx.contract.skip_reason("parameters") else \
            [Finding("parameters", "a fresh layer cannot be built")]
    if check in ("parameters", "buffers"):
        findings = []   # they name state mistakes themselves; what they report is theirs
    if findings:
        by = findings[0].check
        # the state checks run in the cases' own dtype only
        return CheckBlocked(by, "; ".join(f.reason for f in findings if f.check == by), symptom,
                            in_own_dtype=ctx.dtype is not None)
    wrote = writes_input(ctx)
    if wrote:   # the root mistake, which aliasing names; whatever else fails is its symptom (autograd's "modified
        # by an inplace operation", a compiled or reloaded call on a changed input)
        return None if check == "aliasing" else CheckBlocked("aliasing", wrote, symptom,
                                                             in_own_dtype=ctx.dtype is not None)
    blocked = _blocked_in_own_dtype(ctx, check, exc, symptom)
    if blocked is not None:
        return blocked
    for first in PREREQUISITES.get(check, ()):
        failure = _failure(ctx, first)   # failed, or the layer raised in it
        if failure is None:
            continue
        # a prerequisite that is itself a symptom of its failure in the own dtype: blocked by that one
        root = _blocked_in_own_dtype(ctx, first, failure, symptom) or _symptom_of(ctx, first, failure, symptom)
        return root or CheckBlocked(first, BLOCKING_REASONS[first], symptom)
    return _symptom_of(ctx, check, exc, symptom)


def _symptom_of(ctx, check: str, exc: BaseException, symptom: str) -> CheckBlocked | None:
    """Failures that are another check's mistake seen from here, though the check does not rest on it: the values
    of a layer that mixes examples (batching saw one example move another's output), a compiled program's NaN
    where the eager outputs are already wrong (eps outside the square root, under XLA); blocked by the root of
    that check's own failure."""
    if check == "values" and ctx.dtype is None:
        mixing = _failure(ctx, "batching")
        if isinstance(mixing, CheckFailed) and _MIXES in mixing.message:
            return CheckBlocked("batching", BLOCKING_REASONS["batching"], symptom)
    if check == "compiled" and _NOT_FINITE.search(symptom):
        wrong = _failure(ctx, "values")
        if wrong is not None:
            deeper = blocker_for(ctx, "values", wrong)
            return CheckBlocked(deeper.by, deeper.reason, symptom) if deeper else \
                CheckBlocked("values", BLOCKING_REASONS["values"], symptom)
    return None
