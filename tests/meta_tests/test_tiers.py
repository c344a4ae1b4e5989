"""The suite's two tiers (docs/testing.md): the fast one (`-m "not full"`, run first by scripts/test.sh) holds at least
one test of every test module, except the modules of tests/conftest.py's NO_FAST_TEST, each with its reason; the
tier markers are registered. tests/conftest.py decides the tier of each test (its module, its markers, and whether
it or one of its fixtures starts a nested pytest run through tests/support.py).

No timing here: the fast tier's measured wall time is in docs/benchmark.md, with its command."""
from __future__ import annotations

import re
from pathlib import Path

from tests.support import pytest_run

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _modules() -> set[str]:
    """Every test module of the suite (tests/**/test_*.py) but the meta-tests', relative to tests/."""
    return {p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py")
            if p.relative_to(TESTS).parts[0] != "meta_tests"}


def _fast_counts(modules: list[str]) -> dict[str, int]:
    """{module: the number of its fast tests} from a collection of ``modules`` alone (no test runs)."""
    proc = pytest_run("--collect-only", "-q", "-n", "0", "-m", "not full", *(f"tests/{m}" for m in modules),
                      timeout=300)
    assert proc.returncode in (0, 5), proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = dict.fromkeys(modules, 0)
    for line in proc.stdout.splitlines():
        m = re.match(r"tests/(\S+?\.py)::", line)
        if m and m.group(1) in counts:
            counts[m.group(1)] += 1
    return counts


def test_the_tier_markers_are_registered(pytestconfig):
    registered = {line.split(":")[0].strip() for line in pytestconfig.getini("markers")}
    assert {"full", "slow"} <= registered, registered


def test_the_launchers_are_found_in_support(tiers):
    assert {"pytest_run", "pytest_command", "gate_run"} <= set(tiers.launchers), tiers.launchers


def test_the_exception_list_names_existing_modules_each_with_its_reason(tiers):
    modules = _modules()
    for module, reason in tiers.no_fast_test.items():
        assert module in modules, f"NO_FAST_TEST names {module}, which is not a test module"
        assert isinstance(reason, str) and len(reason) > 10, (module, reason)


def test_the_tests_kept_fast_anyway_exist(tiers):
    for key in tiers.fast_anyway:
        module, _, name = key.partition("::")
        path = TESTS / module
        assert path.is_file(), f"FAST_ANYWAY names {key}: there is no {module}"
        function = name.split("::")[-1].partition("[")[0]
        assert f"def {function}(" in path.read_text(), f"FAST_ANYWAY names {key}: {module} has no {function}"


# in FAST_ANYWAY: its nested run is a collection, only of the modules this session did not collect
def test_every_test_module_has_a_fast_test_or_is_listed_with_its_reason(tiers):
    modules = _modules()
    counts = {m: c["fast"] for m, c in tiers.census.items() if m in modules}
    missing = sorted(modules - set(counts))
    if missing:   # not collected in this session (a run of some modules only): collect them alone
        counts.update(_fast_counts(missing))
    without = sorted(m for m, n in counts.items() if n == 0 and m not in tiers.no_fast_test)
    assert not without, (
        "these test modules have no test in the fast tier: give each a cheap test, name its cheapest one in "
        "tests/conftest.py's FAST_ANYWAY, or list the module with the reason in NO_FAST_TEST:\n  " + "\n  ".join(without))
    listed_but_fast = sorted(m for m in tiers.no_fast_test if counts.get(m, 0) > 0)
    assert not listed_but_fast, f"listed in NO_FAST_TEST but they have fast tests now: {listed_but_fast}"
