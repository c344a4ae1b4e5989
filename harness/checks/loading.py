"""Optional state and strict loading: ``strict_loading``.

A layer with an optional slot (RMSNorm's bias) has two shapes of saved state. The contract
names the constructor variant without the slot; the framework's strict load must refuse a
state of the other shape in both directions, and the error it raises is recorded.
"""
from __future__ import annotations

from .. import inputs as inputs_mod
from .base import CheckFailed, CheckSkipped, unexpected_error
from ..adapters.base import Unsupported
from .optional import call_adapter, require


def _describe(exc) -> str:
    text = f"{getattr(exc, 'type_name', type(exc).__name__)}: {exc}"
    return text if len(text) <= 600 else text[:600] + "..."


def check_strict_loading(ctx):
    """The saved state grows by exactly the optional slots; the layer's own state loads strictly;
    a state saved without them, or with them into the variant, is refused by the strict load."""
    spec = ctx.contract.data.get("strict_loading")
    if not spec:
        raise CheckSkipped("the contract declares no optional state", not_applicable=True)
    if ctx.is_function:
        raise CheckSkipped("a function contract has no saved state", not_applicable=True)
    require(ctx, "export_state", "load_state")
    adapter, contract = ctx.adapter, ctx.contract
    variant_args = {**contract.constructor, **spec["variant"]}
    variant_text = ", ".join(f"{k}={v!r}" for k, v in spec["variant"].items())

    def variant():
        try:
            return adapter.build(adapter.construct(ctx.impl, variant_args), ctx.first_inputs())
        except Exception as exc:
            raise CheckFailed(f"the variant with {variant_text} cannot be built: {unexpected_error(exc)}") from exc

    full = ctx.new_layer(inputs_mod.test_state(contract))
    small = variant()
    mapping = ctx.slot_map(full, strict=True)
    unknown = [s for s in spec["slots"] if s not in mapping]
    if unknown:
        raise CheckFailed(f"strict_loading.slots names {unknown}, not state slots of the contract "
                          f"({contract.location('strict_loading', 'slots')})")
    optional = sorted(mapping[s] for s in spec["slots"])
    full_names, small_names = set(adapter.serialized_state(full)), set(adapter.serialized_state(small))
    grown, lost = sorted(full_names - small_names), sorted(small_names - full_names)
    problems, details = [], {"optional": optional, "grows_by": grown}
    if grown != optional or lost:
        problems.append(f"the saved state should grow by exactly {optional} over the variant with {variant_text}; "
                        f"it grows by {grown or 'nothing'}" + (f" and loses {lost}" if lost else "")
                        + ": the flag does not add or remove the slot")

    # the matching state must load, or the refusals below would prove nothing
    try:
        call_adapter(ctx, "load_state", ctx.new_layer(), call_adapter(ctx, "export_state", full), strict=True)
    except (CheckSkipped, Unsupported):
        raise
    except Exception as exc:
        raise CheckFailed("; ".join(problems + [f"the layer's own saved state does not load strictly into a "
                                                 f"fresh instance: {unexpected_error(exc)}"]), **details) from exc

    for direction, source, target, what in (
            ("missing", small, ctx.new_layer, f"a state saved by the variant with {variant_text} (without "
                                              f"{optional}) loaded strictly into the layer"),
            ("unexpected", full, variant, f"the layer's state (with {optional}) loaded strictly into the "
                                          f"variant with {variant_text}")):
        saved = call_adapter(ctx, "export_state", source)
        try:
            call_adapter(ctx, "load_state", target(), saved, strict=True)
        except (CheckSkipped, Unsupported):
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
