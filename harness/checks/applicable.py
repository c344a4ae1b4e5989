"""Which checks a contract can never run, decided from the contract alone (no framework imported).

The judge does not collect such a check (pytest's convention: no item for what can never run); the
results file and the HTML report still show its cell as n/a with the reason given here. The runner asks
the same question first, so a check run another way (``--check`` on such a contract, the harness's unit
tests) says the same words. What depends on the layer or the machine (a second device, a framework's
mechanism) is decided by the check itself, and is a skip of an item that exists.

``contract_says`` is the one mapping from the contract's keys to records (docs/contracts.md, "Not applicable,
and skips"): ``frameworks.<fw>.not_applicable``, a section's ``{not_applicable: why}`` (``compiled``, ``export``,
``mixed_precision``, ``batching``, ``construction``, ``aliasing``, ``abstract``, ``layout``), ``native.<fw>.none`` and what the contract leaves out are n/a (outcome skipped,
``not_applicable`` true, the reason the message: ``layer_conformance.record.NotApplicable``'s record form);
``checks.<id>.skip`` is a skip that is not n/a (``not_applicable`` false; why the two differ: ``checks.base``).

``adapter_lacks`` is the one place a framework's missing capability becomes n/a: a protocol method the check's
``CheckSpec.needs`` names that the executor's adapter does not implement (its hello), said before the check runs.
"""
from __future__ import annotations


def _function(contract, what):
    return what if contract.kind == "function" else None


def _spec_not_applicable(spec, prefix="not applicable: "):
    return f"{prefix}{spec.not_applicable}" if spec.not_applicable else None


def _no_gradient(contract, framework):
    return "the contract declares no gradient" if not contract.gradients.declared else None


def _native(contract, framework):
    spec = contract.native.get(framework)
    if spec is None:
        return f"the contract names no native {framework} layer"
    return f"no native {framework} layer: {spec.none}" if spec.none is not None else None


def _modes(contract, framework):
    if not contract.modes:
        return "the contract declares no training/evaluation behaviour"
    return _function(contract, "a function contract has no training flag")


def _properties(contract, framework):
    if not contract.properties:
        return "the contract states no properties"
    return _function(contract, "properties are stated for layers")


def _strict_loading(contract, framework):
    return _function(contract, "a function contract has no saved state") or \
        (None if contract.trainable or contract.non_trainable else "the contract declares no state")


_RULES = {
    "parameters": lambda c, fw: _function(c, "a function contract has no layer state"),
    "buffers": lambda c, fw: (_function(c, "a function contract has no layer state")
                              or (None if c.non_trainable else "the contract declares no non-trainable state")),
    "composition": lambda c, fw: _function(c, "a function contract is not a layer"),
    "serialization": lambda c, fw: _function(c, "a function contract is not a layer"),
    "device_parity": _no_gradient,
    "native": _native,
    "gradients": _no_gradient,
    "strict_loading": _strict_loading,
    "modes": _modes,
    "properties": _properties,
    "forward_mode": lambda c, fw: None if c.forward_mode is not None else "the contract does not ask for forward mode",
    "second_order": lambda c, fw: (None if c.second_order is not None
                                   else "the contract does not ask for second-order derivatives"),
    "compiled": lambda c, fw: _spec_not_applicable(c.compiled),
    "export": lambda c, fw: _spec_not_applicable(c.export, prefix=""),
    "mixed_precision": lambda c, fw: _spec_not_applicable(c.mixed_precision),
    "batching": lambda c, fw: _spec_not_applicable(c.batching),
    "construction": lambda c, fw: (_function(c, "a function contract constructs no layer")
                                   or _spec_not_applicable(c.construction)),
    "aliasing": lambda c, fw: _spec_not_applicable(c.aliasing),
    "abstract": lambda c, fw: _spec_not_applicable(c.abstract),
    "layout": lambda c, fw: _spec_not_applicable(c.layout),
}


def not_applicable(contract, check: str, framework: str, whole_framework: bool = False) -> str | None:
    """Why ``check`` can never run for ``contract`` in ``framework``, or None where it can. ``whole_framework``:
    ``frameworks.<fw>.not_applicable`` counts too (a bundled target: a user's own layer in that framework runs)."""
    whole = contract.not_applicable(framework) if whole_framework else None
    if whole:
        return f"not applicable in {framework}: {whole}"
    rule = _RULES.get(check)
    return rule(contract, framework) if rule else None


def contract_says(contract, check: str, framework: str, whole_framework: bool = False) -> dict | None:
    """The record fields (outcome, message, not_applicable) for what the contract's keys alone make of ``check``
    in ``framework``, or None where they let it run: n/a first (it can never run), then ``checks.<id>.skip``."""
    reason = not_applicable(contract, check, framework, whole_framework)
    if reason:
        return {"outcome": "skipped", "message": reason, "not_applicable": True, "na_source": "contract"}
    reason = contract.skip_reason(check)
    if reason:
        return {"outcome": "skipped", "message": reason, "not_applicable": False}
    return None


def adapter_lacks(check: str, adapter) -> dict | None:
    """The record fields of the n/a for a protocol method ``check`` needs (``CheckSpec.needs``) that ``adapter``
    does not implement (its executor's hello says which it does), or None where it has them all."""
    from ..check_catalog import spec_of
    from ..protocol import AREAS
    for method in spec_of(check).needs:
        if not adapter.implements(method):
            area = next((a for a, p in AREAS.items() if method in vars(p)), "?")
            return {"outcome": "skipped", "not_applicable": True, "na_source": "framework",
                    "message": f"the {adapter.name} adapter does not implement {method} (the {area} protocol)",
                    "details": {"na_reason": "not_in_adapter"}}
    return None
