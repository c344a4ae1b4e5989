"""One execution path (issue 30 §1): every verdict, the harness's own tests' included, comes from code under
test running in executors, as in a user's run. There is no in-process mode to fall back on: no branch on a
missing session, and the entry points refuse an implementation object."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"


def test_no_branch_runs_the_code_under_test_without_executors():
    branches = []
    for path in sorted(HARNESS.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            # the plugin's own lazily made session (``self._session``) is not a second path
            if re.search(r"(?<!_)session is (not )?None", line):
                branches.append(f"{path.relative_to(HARNESS.parent)}:{n}: {line.strip()}")
    assert not branches, "\n".join(branches)


def test_the_entry_points_need_a_session_and_a_module_path():
    from layer_conformance.contract import bundled_contracts, load_contract
    from layer_conformance.runner import check_all, context_for
    for entry in (context_for, check_all):
        session = inspect.signature(entry).parameters["session"]
        assert session.kind is inspect.Parameter.KEYWORD_ONLY and session.default is inspect.Parameter.empty
    contract = load_contract(bundled_contracts()["rmsnorm"])
    with pytest.raises(TypeError, match="module:attr"):
        context_for(contract, object, "torch", session=object())
