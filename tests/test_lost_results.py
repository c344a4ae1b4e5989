"""No result is ever lost: the plan and a journal are written as the run goes, the results file is
written atomically, and a run that does not cover its plan never exits 0."""
import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.support import ROOT, pytest_command, pytest_run

pytest.importorskip("torch")


def _bindings(tmp_path, *impls):
    path = tmp_path / "bindings.yaml"
    path.write_text("".join(f'- {{contract: rmsnorm, impl: "{i}"}}\n' for i in impls))
    return path


def test_sigterm_mid_run_leaves_incomplete_results_that_say_so(tmp_path):
    bindings = _bindings(tmp_path, "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "tests.hostile.torch_hostile:Hangs")
    out = tmp_path / "results.json"
    journal = Path(str(out) + ".journal")
    proc = subprocess.Popen(pytest_command("-q", "--dtype", "float32", "--bindings", str(bindings),
                                           "--framework", "torch", "--check", "values", "--check", "parameters",
                                           "--check-timeout", "120", "--conformance-json", str(out),
                                           "--rootdir", str(ROOT)),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    # the correct layer's two checks finish first; then the run sits in the hanging layer's check
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"record"') >= 2:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the journal never showed two records")
    plan = json.loads(journal.read_text().splitlines()[0])["plan"]
    assert len(plan) == 4, plan  # written before any check ran
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode not in (0, 1, 5), output[-3000:]
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["planned"] == 4 and doc["not_run"] == 2, {k: doc[k] for k in doc if k != "results"}
    by = {(r["impl"].rpartition(":")[2], r["check"]): r for r in doc["results"]}
    assert by[("IMPL", "values")]["outcome"] == "passed"
    assert by[("Hangs", "values")]["message"] == "not run: interrupted (SIGTERM)"
    assert by[("Hangs", "values")]["not_run"] is True and by[("Hangs", "values")]["outcome"] == "error"
    assert not journal.exists() or "record" in journal.read_text()  # an incomplete run keeps its journal


def test_unwritable_report_path_does_not_cost_the_json(tmp_path):
    bindings = _bindings(tmp_path, "layer_conformance.reference_impls.torch.rmsnorm:IMPL")
    out = tmp_path / "results.json"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the report's folder should be")
    proc = pytest_run("-q", "--dtype", "float32", "--bindings", str(bindings), "--framework", "torch",
                      "--check", "values", "--conformance-json", str(out),
                      "--conformance-html", str(blocker / "report.html"), "--rootdir", str(ROOT), cwd=ROOT, timeout=300)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["complete"] is True and [r["outcome"] for r in doc["results"]] == ["passed"]
    assert proc.returncode != 0  # the report was asked for and could not be written
    assert "report.html" in proc.stdout + proc.stderr


def test_results_file_is_replaced_atomically(tmp_path):
    from layer_conformance import results
    path = tmp_path / "r.json"
    path.write_text("old")
    results.write(path, [], {"seed": 0}, {"complete": True, "planned": 0, "not_run": 0})
    assert json.loads(path.read_text())["complete"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind
