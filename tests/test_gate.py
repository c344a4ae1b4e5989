"""The CI gate: expectations files, baseline comparison, exit codes (unit tests plus a few real runs)."""
import json
import re
import textwrap

import pytest

from layer_conformance import results
from layer_conformance.record import Record
from layer_conformance.gate import (ExpectationsError, apply_expectations, compare, excused, expectation_for,
                                    load_expectations, unmatched, updated_expectations)
from tests.support import pytest_run


def _rec(check, outcome, contract="centered", impl="mylayers:Centered", framework="torch", device="cpu", **kw):
    return Record(contract=contract, impl=impl, framework=framework, device=device, check=check, outcome=outcome,
                  message=kw.pop("message", ""), nodeid=f"x::{contract}::{check}", **kw)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


# --- expectations file ------------------------------------------------------------------------

def test_entries_match_by_glob_where_globs_are_allowed_and_omitted_fields_match_anything(tmp_path):
    p = _write(tmp_path, "exp.yaml", """\
        expectations:
          - contract: rms*
            framework: tensorflow
            expected: fail
            reason: keras drops the gain
          - check: "[sv]*"
            expected: [error]
            link: https://example.org/1
        """)
    first, second = load_expectations(p, allow_glob=True)
    assert first.outcomes == ("failed", "error") and first.where == f"{p}:2"
    assert first.matches(_rec("values", "failed", contract="rmsnorm", framework="tensorflow"))
    assert not first.matches(_rec("values", "failed", contract="rmsnorm", framework="torch"))
    assert second.outcomes == ("error",) and second.link == "https://example.org/1"
    assert second.matches(_rec("serialization", "error")) and not second.matches(_rec("gradients", "error"))


def test_a_bare_list_and_an_empty_file_are_accepted(tmp_path):
    assert len(load_expectations(_write(tmp_path, "a.yaml", "- {check: values, expected: failed, reason: r}\n"))) == 1
    assert load_expectations(_write(tmp_path, "b.yaml", "# nothing expected yet\n")) == []


@pytest.mark.parametrize("text,where", [
    ("expectations:\n  - contract: centered\n    expected: fail\n", ":2: reason: required"),
    ("expectations:\n  - contract: centered\n    reason: r\n    expected: maybe\n", ":4: expected: 'maybe'"),
    ("expectations:\n  - contract: centered\n    colour: red\n    expected: fail\n    reason: r\n", ":3: colour: unknown"),
    ("expectations:\n  - check:\n    expected: fail\n    reason: r\n", ":2: check: expected a non-empty string"),
    ("expectations:\n  - contract: a\n    contract: b\n    expected: fail\n    reason: r\n", ":3: contract: given twice"),
    ("expectations:\n  - contract: a\n    reason: r\n", ":2: expected: required"),
    ("expectations: {contract: a}\n", ":1: expectations: expected a list"),
    ("expected_failures: []\n", ":1: expected_failures: unknown top-level key"),
    ("expectations:\n  - [a, b]\n", ":2: (entry): expected a mapping"),
    ("expectations:\n  - contract: [a\n", ":3: (yaml)"),
])
def test_malformed_file_names_file_line_and_field(tmp_path, text, where):
    p = _write(tmp_path, "bad.yaml", text)
    with pytest.raises(ExpectationsError) as exc:
        load_expectations(p)
    assert f"{p}{where}" in str(exc.value)


def test_excused_prefers_the_entry_that_covers_the_outcome_and_leaves_the_record_as_it_was(tmp_path):
    exps = load_expectations(_write(tmp_path, "e.yaml", """\
        - {check: values, expected: error, reason: only errors}
        - {check: values, expected: failed, reason: wrong numbers}
        - {check: gradients, expected: fail, reason: known}
        - {contract: nothing-like-this, check: values, expected: fail, reason: stale}
        """))
    failed, passed, skipped = _rec("values", "failed"), _rec("gradients", "passed"), _rec("gradients", "skipped")
    assert expectation_for(exps, failed).reason == "wrong numbers"
    copy = excused(failed, exps)
    assert copy is not failed and copy.expected is True and failed.expected is False and failed.expectation is None
    assert copy.expectation["reason"] == "wrong numbers" and copy.expectation["where"].endswith(":2")
    assert copy.key() == failed.key() and copy.outcome == failed.outcome
    now_passing = excused(passed, exps)
    assert now_passing.unexpectedly_passed is True and passed.unexpectedly_passed is False
    assert excused(skipped, exps) is skipped and not skipped.expected and skipped.expectation is None
    other = _rec("parameters", "failed")
    assert excused(other, exps) is other
    assert [r.expected for r in apply_expectations([failed, other], exps)] == [True, False]
    assert [e.reason for e in unmatched(exps, [failed, passed])] == ["stale"]


def test_update_keeps_reasons_drops_fixed_entries_and_adds_new_failures(tmp_path):
    exps = load_expectations(_write(tmp_path, "e.yaml", """\
        - {check: values, expected: fail, reason: still broken}
        - {check: gradients, expected: fail, reason: fixed since}
        - {framework: mxnet, check: values, expected: fail, reason: not run here}
        """))
    records = [_rec("values", "failed"), _rec("gradients", "passed"), _rec("devices", "error", message="boom\nmore")]
    entries, counts = updated_expectations(exps, records)
    assert counts == {"kept": 2, "dropped": 1, "added": 1}
    assert [e.get("reason") for e in entries[:2]] == ["still broken", "not run here"]
    added = entries[2]
    assert {k: added[k] for k in ("contract", "impl", "framework", "device", "check", "expected")} == {
        "contract": "centered", "impl": "mylayers:Centered", "framework": "torch", "device": "cpu",
        "check": "devices", "expected": "fail"}
    assert added["reason"].endswith(": boom")


# --- baseline comparison ----------------------------------------------------------------------

def test_compare_sorts_checks_into_changes():
    old = [_rec("values", "passed"), _rec("gradients", "failed"), _rec("devices", "error"), _rec("parameters", "passed"),
           _rec("buffers", "passed"), _rec("native", "failed"), _rec("values", "passed", framework="jax")]
    new = [_rec("values", "failed"), _rec("gradients", "passed"), _rec("devices", "failed"), _rec("parameters", "passed"),
           _rec("composition", "error"), _rec("serialization", "failed", expected=True)]
    c = compare(old, new, in_scope=lambda r: r.framework == "torch")
    # a failure the baseline did not have is new, whether the check passed there or was not run
    assert [n.check for _, n in c.newly_failing] == ["composition", "serialization", "values"]
    assert [n.check for _, n in c.newly_passing] == ["gradients"]
    assert [n.check for _, n in c.unchanged_failing] == ["devices"]
    # buffers passed and native failed, both vanished; the jax check is out of this run's scope
    assert [o.check for o in c.disappeared] == ["buffers", "native"]
    assert [r.check for r in c.regressions] == ["composition", "values", "buffers", "native"]  # serialization: expected
    assert c.summary() == ("3 newly failing, 1 newly passing, 1 unchanged failing (2 of the newly failing not in "
                           "the baseline; 1 of the newly failing expected; 2 baseline check(s) no longer run)")


def test_an_expected_newly_failing_check_is_no_regression():
    c = compare([_rec("values", "passed")], [_rec("values", "failed", expected=True)])
    assert len(c.newly_failing) == 1 and c.regressions == []
    assert "1 of the newly failing expected" in c.summary()


# --- real runs (one small torch layer, two checks) ----------------------------------------------

GOOD = "from torch import nn\n\nclass Centered(nn.Module):\n    def forward(self, X):\n        return X - X.mean()\n"
BROKEN = GOOD.replace("X - X.mean()", "X - X.mean() + 0.5")


@pytest.fixture
def project(tmp_path):
    """A user's repository: mylayers.py, and a baseline where both checks passed."""
    pytest.importorskip("torch")
    recs = [_rec("parameters", "passed"), _rec("values", "passed")]
    (tmp_path / "baseline.json").write_text(json.dumps(results.document(
        recs, results.environment({"torch": "x"}, {"torch": ["cpu"]}, 0))))
    return tmp_path


def _pytest(cwd, layer_source, *args):
    (cwd / "mylayers.py").write_text(layer_source)
    # --assert=plain: nothing here needs rewriting, and it halves the start-up time
    return pytest_run("-q", "--assert=plain", "--contract", "centered", "--impl", "mylayers:Centered",
                      "--check", "parameters", "--check", "values", "--dtype", "float32", *args, cwd=cwd, timeout=300)


def test_a_broken_layer_against_its_baseline_fails_and_is_named(project):
    proc = _pytest(project, BROKEN, "--baseline", "baseline.json", "--conformance-json", "out/r.json",
                   "--conformance-html", "out/r.html")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 newly failing, 0 newly passing, 0 unchanged failing" in proc.stdout
    assert re.search(r"REGRESSION: centered mylayers:Centered \[torch-cpu\] values: passed -> failed", proc.stdout)
    assert "1 regression(s) against the baseline (exit 1)" in proc.stdout
    assert (project / "out/r.json").exists()
    html = (project / "out/r.html").read_text()
    assert "newly failing" in html and '"change":"newly_failing"' in html


def test_an_expectations_entry_lets_the_same_run_pass(project):
    _write(project, "expectations.yaml", """\
        expectations:
          - contract: centered
            impl: "mylayers:Centered"
            check: values
            expected: fail
            reason: the offset bug, fixed in the next release
          - framework: mxnet
            check: values
            expected: fail
            reason: about another environment
        """)
    proc = _pytest(project, BROKEN, "--baseline", "baseline.json", "--expectations", "expectations.yaml",
                   "--conformance-json", "r.json", "--conformance-html", "r.html")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 xfailed" in proc.stdout and "xfail" in proc.stdout
    assert "expectations.yaml:7: the entry for framework=mxnet, check=values matches no check in this run" in proc.stdout
    values = next(r for r in results.load(project / "r.json")["results"] if r.check == "values")
    assert values.outcome == "failed" and values.expected is True
    assert values.expectation["reason"] == "the offset bug, fixed in the next release"
    assert '"status":"xfail"' in (project / "r.html").read_text()


def test_a_failure_the_baseline_already_had_is_no_regression(project):
    base = json.loads((project / "baseline.json").read_text())
    base["results"][1].update(outcome="failed", message="was already broken")
    (project / "failing-baseline.json").write_text(json.dumps(base))
    proc = _pytest(project, BROKEN, "--baseline", "failing-baseline.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 newly failing, 0 newly passing, 1 unchanged failing" in proc.stdout


def test_strict_expectations_fail_on_a_fixed_layer_and_update_rewrites_the_file(project):
    _write(project, "expectations.yaml", """\
        expectations:
          - {check: values, expected: fail, reason: was broken}
          - {framework: mxnet, check: values, expected: fail, reason: about another environment}
        """)
    proc = _pytest(project, GOOD, "--expectations", "expectations.yaml", "--strict-expectations",
                   "--update-expectations")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "XPASS(strict)" in proc.stdout and "now passing: centered mylayers:Centered [torch-cpu] values" in proc.stdout
    assert "1 kept, 1 dropped as now passing, 0 added" in proc.stdout
    rewritten = load_expectations(project / "expectations.yaml")
    assert [(e.patterns, e.reason) for e in rewritten] == [({"framework": "mxnet", "check": "values"},
                                                            "about another environment")]


def test_a_malformed_expectations_file_is_a_usage_error(project):
    _write(project, "bad.yaml", "expectations:\n  - check: values\n    expected: sometimes\n    reason: r\n")
    proc = _pytest(project, GOOD, "--expectations", "bad.yaml")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "bad.yaml:3: expected: 'sometimes'" in proc.stderr
