"""Every check can fail: each mutant is caught by the check named for it, with a message that
names the mistake, while the bundled reference implementations pass every check."""
import importlib
import importlib.util

import pytest

from harness import adapters
from harness.contract import bundled_contracts, load_contract
from harness.runner import check_all, run_check, context_for
from harness.targets import bundled_impl, resolve_impl
from tests.mutants.catalogue import modules


def _catalogue():
    out = []
    for fw in adapters.FRAMEWORKS:
        if not adapters.installed(fw):
            continue
        for mod in modules(fw):
            out += importlib.import_module(mod).MUTANTS
    return out


def _installed_frameworks():
    return [fw for fw in adapters.FRAMEWORKS if adapters.installed(fw)]


MUTANTS = _catalogue()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_mutant_is_caught(mutant):
    contract = load_contract(bundled_contracts()[mutant.contract])
    ctx = context_for(contract, resolve_impl(mutant.impl), mutant.framework)
    rec = run_check(ctx, mutant.check)
    assert rec["outcome"] == "failed", f"{mutant.id} was not caught: {rec}"
    assert mutant.message in rec["message"], rec["message"]


REFERENCES = [(fw, name) for fw in _installed_frameworks() for name in bundled_contracts()
              if bundled_impl(fw, name)]


@pytest.mark.parametrize("framework,contract", REFERENCES, ids=[f"{f}-{c}" for f, c in REFERENCES])
def test_reference_passes_every_check(framework, contract):
    c = load_contract(bundled_contracts()[contract])
    records = check_all(c, resolve_impl(bundled_impl(framework, contract)), framework)
    bad = {k: r for k, r in records.items() if r["outcome"] not in ("passed", "skipped")}
    assert not bad, bad
    assert any(r["outcome"] == "passed" for r in records.values())
