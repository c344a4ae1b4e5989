"""Strict loading: ``strict_loading``, for every layer contract with state.

The layer's own saved state must load strictly into a fresh instance, and a saved state that
lacks one of its slots, or holds an extra one, must be refused the way the framework promises
(torch ``load_state_dict(strict=True)``, Keras ``set_weights``, the flax state dict, Gluon
``load_parameters`` without allow_missing/ignore_extra): a layer that overrides its load to
ignore such keys would start from its initial weights without a word.

A layer with an optional slot (RMSNorm's bias) has two shapes of saved state. The contract
names the constructor variant without the slot; the framework's strict load must refuse a
state of the other shape in both directions, and the error it raises is recorded.
"""
from __future__ import annotations

import re
import tempfile

from .base import CheckFailed, unexpected_error
from ..record import NotApplicable


def _describe(exc) -> str:
    # a temporary file's name would make two runs' results differ
    text = re.sub(re.escape(tempfile.gettempdir()) + r"/\S+", "<saved file>",
                  f"{getattr(exc, 'type_name', type(exc).__name__)}: {exc}")
    return text if len(text) <= 600 else text[:600] + "..."


_EXTRA = "unexpected_slot"  # the key added to a saved state; no contract names a slot so


def _refuses_altered_state(ctx, problems, details):
    """A saved state without each slot, and one with an extra entry, each loaded strictly into a
    fresh layer, must raise."""
    adapter = ctx.adapter
    full = ctx.new_layer(ctx.test_state(), strict=False)
    saved = ctx.adapter.export_state(full)
    try:
        ctx.adapter.load_state(ctx.new_layer(), saved, strict=True)
    except NotApplicable:
        raise
    except Exception as exc:
        raise CheckFailed(f"the layer's own saved state does not load strictly into a fresh instance: "
                          f"{unexpected_error(exc)}") from exc
    names = set(adapter.serialized_state(full))
    mapping = ctx.slot_map(full)
    dropped = sorted((slot, str(name)) for slot, name in mapping.items() if name in names)
    trials = [(f"a saved state without slot {slot!r}" + (f" ({name!r})" if name != slot else ""), "missing",
               {"drop": name}) for slot, name in dropped]
    trials.append((f"a saved state with an extra entry {_EXTRA!r}", "unexpected", {"add": _EXTRA}))
    for what, direction, change in trials:
        altered = ctx.adapter.alter_saved(full, saved, **change)
        try:
            ctx.adapter.load_state(ctx.new_layer(), altered, strict=True)
        except NotApplicable:
            raise
        except Exception as exc:
            details.setdefault(f"{direction}_slot_errors", []).append(_describe(exc))
        else:
            problems.append(f"{what} loaded strictly without an error: the layer's load ignores "
                            f"{direction} keys, so a checkpoint that does not fit would leave the layer at "
                            f"its initial weights without a word")


def check_strict_loading(ctx):
    """The layer's own state loads strictly; a state lacking a slot, or with an extra one, is
    refused. With optional state (``strict_loading`` in the contract) the saved state grows by
    exactly the optional slots, and a state of either shape is refused by the other."""
    problems, details = [], {}
    _refuses_altered_state(ctx, problems, details)
    spec = ctx.contract.strict_loading
    if not spec:
        if problems:
            raise CheckFailed("; ".join(problems), **details)
        return details
    adapter, contract = ctx.adapter, ctx.contract
    variant_args = ctx.constructor_args(spec.variant)
    variant_text = ", ".join(f"{k}={v!r}" for k, v in spec.variant.items())

    def variant():
        try:
            return adapter.build(adapter.construct(ctx.impl, variant_args), ctx.first_inputs())
        except Exception as exc:
            raise CheckFailed(f"the variant with {variant_text} cannot be built: {unexpected_error(exc)}") from exc

    full = ctx.new_layer(ctx.test_state())
    small = variant()
    mapping = ctx.slot_map(full, strict=True)
    optional = sorted(str(mapping[s]) for s in spec.slots)
    full_names, small_names = set(adapter.serialized_state(full)), set(adapter.serialized_state(small))
    grown, lost = sorted(full_names - small_names), sorted(small_names - full_names)
    details.update(optional=optional, grows_by=grown)
    if grown != optional or lost:
        problems.append(f"the saved state should grow by exactly {optional} over the variant with {variant_text}; "
                        f"it grows by {grown or 'nothing'}" + (f" and loses {lost}" if lost else "")
                        + ": the flag does not add or remove the slot")

    for direction, source, target, what in (
            ("missing", small, ctx.new_layer, f"a state saved by the variant with {variant_text} (without "
                                              f"{optional}) loaded strictly into the layer"),
            ("unexpected", full, variant, f"the layer's state (with {optional}) loaded strictly into the "
                                          f"variant with {variant_text}")):
        saved = ctx.adapter.export_state(source)
        try:
            ctx.adapter.load_state(target(), saved, strict=True)
        except NotApplicable:
            raise
        except Exception as exc:
            details[f"{direction}_slot_error"] = _describe(exc)
            details[f"{direction}_error_names_slot"] = all(name in str(exc) for name in optional)
        else:
            problems.append(f"{what} without an error: strict loading must refuse a state with a "
                            f"{direction} slot, so that a checkpoint of the other shape cannot load silently")
    if problems:
        raise CheckFailed("; ".join(problems), **details)
    return details
