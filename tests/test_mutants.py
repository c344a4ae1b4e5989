"""Every check can fail, and one mistake fails only its own checks: each mutant fails exactly the checks
its catalogue entry declares (the one that names the mistake, with a message that names it, plus the
axes the mistake really breaks), is reported blocked on exactly the checks declared blocked, and passes
or skips every other check; the bundled reference implementations pass every check.

The verdicts come the way a user's run gets them: each implementation imported and checked in executors
(one session per framework for the test process; each target in a process of its own)."""
import importlib
import importlib.util

import pytest

from layer_conformance.frameworks import FRAMEWORKS, installed
from layer_conformance.checks import DEFAULT_CHECKS, OPT_IN, PER_DTYPE
from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.runner import check_all
from layer_conformance.targets import bundled_impl
from tests.mutants.catalogue import modules


def _catalogue():
    out = []
    for fw in FRAMEWORKS:
        if not installed(fw):
            continue
        for mod in modules(fw):
            out += importlib.import_module(mod).MUTANTS
    return out


def _installed_frameworks():
    return [fw for fw in FRAMEWORKS if installed(fw)]


MUTANTS = _catalogue()
TARGETS = sorted({m.target for m in MUTANTS})


def verdicts(session, framework, contract, impl, dtype=None) -> dict:
    """Every default check, plus the opt-in checks its entries name, on one mutant; in a dtype of the
    contract's ``dtypes``, its per-dtype checks."""
    target = (framework, contract, impl) + ((dtype,) if dtype else ())
    named = {c for m in MUTANTS if m.target == target for c in (m.check, *m.also, *m.blocked)}
    checks = list(DEFAULT_CHECKS) + [c for c in OPT_IN if c in named]
    if dtype:
        checks = [c for c in checks if c in PER_DTYPE]
    return check_all(load_contract(bundled_contracts()[contract]), impl, framework, session=session, checks=checks,
                     dtype=dtype)


def _ids(t):
    return f"{t[0]}-{t[1]}-{t[2].rpartition(':')[2]}" + (f"-{t[3]}" if len(t) > 3 else "")


@pytest.mark.parametrize("target", TARGETS, ids=[_ids(t) for t in TARGETS])
def test_mutant_fails_exactly_its_checks(sessions, target):
    records = verdicts(sessions(target[0]), *target)
    entries = [m for m in MUTANTS if m.target == target]
    fails = {c for c, r in records.items() if r["outcome"] in ("failed", "error")}
    blocked = {c for c, r in records.items() if r["outcome"] == "blocked"}
    summary = {c: (r["outcome"], r.get("blocked_by", ""), r["message"][:200]) for c, r in records.items()
               if r["outcome"] not in ("passed", "skipped")}
    for m in entries:
        assert records[m.check]["outcome"] == "failed", f"{m.id} was not caught: {records[m.check]}"
        assert m.message in records[m.check]["message"], records[m.check]["message"]
        assert fails == m.fails, f"{m.id}: failing {sorted(fails)}, declared {sorted(m.fails)}: {summary}"
        assert blocked == set(m.blocked), f"{m.id}: blocked {sorted(blocked)}, declared {sorted(m.blocked)}: {summary}"
    for c in blocked:  # blocked by a check that fails, and says so, keeping what it saw (its symptom)
        assert records[c]["blocked_by"] in fails, records[c]
        assert records[c]["message"].startswith(f"not run: blocked by {records[c]['blocked_by']} ("), records[c]
        assert records[c]["details"]["symptom"], records[c]


REFERENCES = [(fw, name) for fw in _installed_frameworks() for name in bundled_contracts()
              if bundled_impl(fw, name)]


@pytest.mark.parametrize("framework,contract", REFERENCES, ids=[f"{f}-{c}" for f, c in REFERENCES])
def test_reference_passes_every_check(sessions, framework, contract):
    c = load_contract(bundled_contracts()[contract])
    records = check_all(c, bundled_impl(framework, contract), framework, session=sessions(framework))
    bad = {k: r for k, r in records.items() if r["outcome"] not in ("passed", "skipped")}
    assert not bad, bad
    assert any(r["outcome"] == "passed" for r in records.values())
