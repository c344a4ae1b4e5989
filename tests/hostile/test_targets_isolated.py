"""Issue 29 §5: a patch that crosses targets. One implementation replaced ``torch.nn.Module.__call__`` (a class
attribute: no module-level fingerprint sees it) so that a later, broken implementation in the same run gave the
right values. Each implementation now runs in a layer executor of its own, forked from the framework's zygote,
so the broken one fails. Run through the public command line from a user's directory, with the sandbox the
machine allows (CI runs tests/hostile again without one: the defence does not need it).
"""
import json

import pytest

from tests.hostile.crossing_layers import BROKEN, PATCHER
from tests.support import pytest_run

pytest.importorskip("torch")

BINDINGS = """\
bindings:
  - {contract: rmsnorm, impl: "a_patcher:Layer", framework: torch}
  - {contract: rmsnorm, impl: "b_broken:BrokenNorm", framework: torch}
"""


def _run(tmp_path, *args):
    (tmp_path / "a_patcher.py").write_text(PATCHER)
    (tmp_path / "b_broken.py").write_text(BROKEN)
    (tmp_path / "bindings.yaml").write_text(BINDINGS)
    out = tmp_path / "results.json"
    proc = pytest_run("-n", "0", "--bindings", "bindings.yaml", "--check", "values", "--dtype", "float32",
                      "--conformance-json", str(out), *args, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, timeout=300)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcome = {r["impl"].split(":")[0]: r["outcome"] for r in json.loads(out.read_text())["results"]
               if r["check"] == "values" and r.get("dtype") in (None, "float32")}
    return proc, outcome


def test_a_patch_of_one_target_does_not_reach_the_next(tmp_path):
    proc, outcome = _run(tmp_path)
    # the patcher ran first (its checks come first) and is correct; the broken layer fails on its own merits
    assert outcome.get("a_patcher") == "passed", proc.stdout[-3000:]
    assert outcome.get("b_broken") == "failed", proc.stdout[-3000:]
    assert proc.returncode == 1
