"""A contract's reference, run: the judge's side of ``reference.module``.

The contract loader (``layer_conformance.contract``) reads the reference's names as data and never imports the
module; a reference is code under review, so it is imported and called only in the numpy-only reference executor,
from here. The checks, input generation and the reference's own check (``reference_check.py``) take it from here.
"""
from __future__ import annotations


IMPL = "impl"   # (forward, vjp) of an implementation reference: layer_conformance.impl_reference runs them


def reference(contract):
    """(module, forward, vjp) of ``contract``'s reference, each run in the reference executor (vjp: None where
    the module has none)."""
    from .boundary.session import reference_module, reference_names
    ref = contract.reference
    if ref.impl:   # a trusted implementation: run by layer_conformance.impl_reference, through the checks' context
        return None, IMPL, IMPL
    mod = reference_module(ref.module)
    names, _ = reference_names(ref.module)
    return mod, getattr(mod, ref.forward), getattr(mod, ref.vjp) if ref.vjp in names else None
