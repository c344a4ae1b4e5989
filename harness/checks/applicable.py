"""Which checks a contract can never run, decided from the contract alone (no framework imported).

The judge does not collect such a check (pytest's convention: no item for what can never run); the
results file and the HTML report still show its cell as n/a with the reason given here. The runner asks
the same question first, so a check run another way (``--check`` on such a contract, the harness's unit
tests) says the same words. What depends on the layer or the machine (a second device, a framework's
mechanism) is decided by the check itself, and is a skip of an item that exists.

``contract_says`` is the one mapping from the contract's keys to records (docs/contracts.md, "Not applicable,
and skips"): ``frameworks.<fw>.not_applicable``, and what each check's declaration says the contract makes n/a
(``CheckSpec.contract_na``: a section's ``{not_applicable: why}``, ``native.<fw>.none``, what the contract leaves
out, a function contract for a check about layers) are n/a (outcome skipped,
``not_applicable`` true, the reason the message: ``layer_conformance.record.NotApplicable``'s record form);
``checks.<id>.skip`` is a skip that is not n/a (``not_applicable`` false; why the two differ: ``checks.base``).

``adapter_lacks`` is the one place a framework's missing capability becomes n/a: a protocol method the check's
``CheckSpec.needs`` names that the executor's adapter does not implement (its hello), said before the check runs.
"""
from __future__ import annotations


def not_applicable(contract, check: str, framework: str, whole_framework: bool = False) -> str | None:
    """Why ``check`` can never run for ``contract`` in ``framework``, or None where it can. ``whole_framework``:
    ``frameworks.<fw>.not_applicable`` counts too (a bundled target: a user's own layer in that framework runs)."""
    whole = contract.not_applicable(framework) if whole_framework else None
    if whole:
        return f"not applicable in {framework}: {whole}"
    from ..check_catalog import spec_of
    spec = spec_of(check)
    return spec.contract_na(contract, framework) if spec and spec.contract_na else None


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
    spec = spec_of(check)
    for method in spec.needs if spec else ():
        if not adapter.implements(method):
            area = next((a for a, p in AREAS.items() if method in vars(p)), "?")
            return {"outcome": "skipped", "not_applicable": True, "na_source": "framework",
                    "message": f"the {adapter.name} adapter does not implement {method} (the {area} protocol)",
                    "details": {"na_reason": "not_in_adapter"}}
    return None
