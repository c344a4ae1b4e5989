"""The gate's verdict (layer_conformance.verdict): one pure function the pytest run and `merge --gate` both ask,
and the exit codes (layer_conformance.exitcodes), defined in one module."""
import json
import re

import pytest

from layer_conformance import cli, results
from layer_conformance.exitcodes import ExitCode
from layer_conformance.gate import ExpectationsError, parse_expectations
from layer_conformance.record import Record
from layer_conformance.verdict import verdict
from tests.support import ROOT, pytest_run


def _rec(check, outcome, **kw):
    return Record(contract="centered", impl="mylayers:Centered", framework="torch", device="cpu", check=check,
                  outcome=outcome, message="" if outcome == "passed" else "off by 0.5",
                  nodeid=f"x::centered::{check}", **kw)


def _entries(text, allow_glob=False):
    return parse_expectations(text, "exp.yaml", allow_glob)


EXACT = '- {contract: centered, impl: "mylayers:Centered", check: values, expected: fail, reason: the offset bug}\n'


# --- the function on hand-made records ---------------------------------------------------------------------

def test_all_passed_is_exit_0():
    v = verdict([_rec("values", "passed"), _rec("parameters", "passed")])
    assert (v.exit_code, v.headline, v.failing) == (ExitCode.OK, "gate: passed", ())


def test_a_failure_is_exit_1_and_named():
    failed = _rec("values", "failed")
    v = verdict([_rec("parameters", "passed"), failed])
    assert v.exit_code == ExitCode.FAILED and v.failing == (failed,)
    assert v.headline == "gate: 1 failing check(s) (exit 1)"


def test_an_exact_entry_excuses_its_failure_without_changing_the_record():
    failed = _rec("values", "failed")
    v = verdict([_rec("parameters", "passed"), failed], expectations=_entries(EXACT))
    assert v.exit_code == ExitCode.OK and v.failing == ()
    (excused,) = v.excused
    assert excused.expected is True and excused.expectation == {"reason": "the offset bug", "where": "exp.yaml:1"}
    assert excused.key() == failed.key() and excused.status() == "xfail"
    # the check's own record is final: the excuse is new data
    assert failed.expected is False and failed.expectation is None and v.records[1] is excused


def test_a_glob_entry_is_refused_without_the_flag_and_excuses_with_it():
    glob = "- {contract: centered, check: \"*\", expected: fail, reason: all of it}\n"
    with pytest.raises(ExpectationsError, match="--allow-glob-expectations"):
        _entries(glob)
    v = verdict([_rec("values", "failed")], expectations=_entries(glob, allow_glob=True))
    assert v.exit_code == ExitCode.OK and len(v.excused) == 1


def test_an_incomplete_plan_is_refused():
    v = verdict([_rec("values", "passed")], planned=["x::centered::values", "x::centered::parameters"])
    assert v.exit_code == ExitCode.FAILED and v.missing == ("x::centered::parameters",)
    assert v.headline == "gate: 1 planned check(s) without a result (exit 1)"


def test_an_interrupted_run_gets_no_verdict():
    v = verdict([_rec("values", "failed")], interrupted="SIGTERM")
    assert v.exit_code == ExitCode.INTERRUPTED == 2
    assert v.headline == "gate: interrupted (SIGTERM): no verdict (exit 2)"


def test_against_a_baseline_only_regressions_fail():
    old_failure = verdict([_rec("values", "failed")], baseline=[_rec("values", "failed")])
    assert old_failure.exit_code == ExitCode.OK
    assert old_failure.headline == "gate: passed (no regressions against the baseline)"
    regressed = verdict([_rec("values", "failed")], baseline=[_rec("values", "passed"), _rec("parameters", "passed")])
    assert regressed.exit_code == ExitCode.FAILED and len(regressed.failing) == 2   # values, and parameters gone
    assert regressed.headline == "gate: 2 regression(s) against the baseline (exit 1)"


def test_strict_fails_on_an_expected_failure_that_passes_and_on_a_stale_entry():
    entries = _entries(EXACT + "- {contract: gone, check: values, expected: fail, reason: old}\n")
    lax = verdict([_rec("values", "passed")], expectations=entries)
    assert lax.exit_code == ExitCode.OK and len(lax.xpassed) == 1 and len(lax.stale) == 2
    strict = verdict([_rec("values", "passed")], expectations=entries, strict=True)
    assert strict.exit_code == ExitCode.FAILED
    assert strict.headline == "gate: 1 expected failure(s) now passing, 2 stale expectations entries (exit 1)"
    assert strict.lines()[0][0].startswith("--strict-expectations: 2 stale expectations entries")


def test_entries_the_update_wrote_excuse_failures_only_and_are_never_stale():
    recorded = _entries("- {contract: centered, check: values, expected: fail, reason: recorded}\n")
    v = verdict([_rec("values", "failed"), _rec("values", "passed", dtype="float64")], recorded=recorded,
                strict=True)
    assert v.exit_code == ExitCode.OK and len(v.recorded) == 1 and v.xpassed == () and v.stale == ()


def test_failed_tests_that_are_no_check_fail_it():
    v = verdict([_rec("values", "passed")], other_failures={"test_mine.py::test_x", "x::centered::values"})
    assert v.exit_code == ExitCode.FAILED and v.other == ("test_mine.py::test_x",)


# --- the pytest run and `merge --gate`: the same records, the same verdict ----------------------------------

GOOD = "from torch import nn\n\nclass Centered(nn.Module):\n    def forward(self, X):\n        return X - X.mean()\n"
BROKEN = GOOD.replace("X - X.mean()", "X - X.mean() + 0.5")


@pytest.mark.parametrize("case", ["excused", "regressed"])
def test_the_run_and_the_merge_give_the_same_verdict(tmp_path, capsys, case):
    pytest.importorskip("torch")
    (tmp_path / "mylayers.py").write_text(BROKEN)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(results.document(
        [_rec("parameters", "passed"), _rec("values", "passed")], results.environment({"torch": "x"}, {}, 0))))
    (tmp_path / "exp.yaml").write_text(EXACT)
    gate = ["--expectations", "exp.yaml"] if case == "excused" else ["--baseline", str(baseline)]
    run = pytest_run("-q", "--assert=plain", "--contract", "centered", "--impl", "mylayers:Centered",
                     "--check", "parameters", "--check", "values", "--dtype", "float32",
                     "--conformance-json", "r.json", *gate, cwd=tmp_path, timeout=300)
    headlines = re.findall(r"^gate: .*$", run.stdout, flags=re.M)
    expected = ExitCode.OK if case == "excused" else ExitCode.FAILED
    assert run.returncode == expected and len(headlines) == 1, run.stdout[-3000:] + run.stderr[-3000:]

    merge_gate = ["--gate"] if case == "excused" else ["--baseline", str(baseline)]
    code = cli.main(["merge", str(tmp_path / "r.json"), "-o", str(tmp_path / "m.json"), *merge_gate])
    merged = capsys.readouterr().out
    assert code == run.returncode
    assert re.findall(r"^gate: .*$", merged, flags=re.M) == headlines, merged
    # the merged file holds the run's records, excuses included; asked directly, the function agrees
    doc = results.load(tmp_path / "m.json")
    assert [r.to_json() for r in doc["results"]] == [r.to_json() for r in results.load(tmp_path / "r.json")["results"]]
    direct = verdict(doc["results"], baseline=results.load(baseline)["results"] if case == "regressed" else None)
    assert (direct.exit_code, direct.headline) == (run.returncode, headlines[0])


# --- exit codes: one module ---------------------------------------------------------------------------------

# `EXIT_X = 4`, `EXIT_A, EXIT_B = 0, 1`, `OK = 0` inside an enum: a number given a name
NUMBERED = re.compile(r"^\s*(?:EXIT_\w+\s*,\s*)*EXIT_\w+\s*=\s*\(?\s*\d|^\s*class \w*Exit\w*\(", re.M)


def test_exit_code_numbers_are_defined_only_in_the_exitcodes_module():
    harness = ROOT / "harness"
    where = sorted(str(p.relative_to(harness)) for p in harness.rglob("*.py") if NUMBERED.search(p.read_text()))
    assert where == ["exitcodes.py"], where


def test_the_exit_codes_keep_pytests_numbers():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5]
    assert (ExitCode.OK, ExitCode.FAILED, ExitCode.INTERRUPTED, ExitCode.USAGE_ERROR, ExitCode.NOTHING_SELECTED) == (
        pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED, pytest.ExitCode.USAGE_ERROR,
        pytest.ExitCode.NO_TESTS_COLLECTED)


def test_the_verdict_imports_no_pytest():
    source = (ROOT / "harness" / "verdict.py").read_text()
    assert not re.search(r"^\s*(?:import|from)\s+(?:pytest|_pytest)\b", source, flags=re.M)
    assert not re.search(r"\bopen\(|\bprint\(|read_text|write_text", source), "the verdict does no I/O"


def _record(check, outcome, dtype="", **kw):
    from layer_conformance.record import Record
    return Record(contract="rmsnorm", impl="m:L", framework="torch", device="cpu", check=check, outcome=outcome,
                  dtype=dtype, nodeid=f"rmsnorm.yaml::rmsnorm[L-torch-cpu{'-' + dtype if dtype else ''}]::{check}",
                  **kw)


def test_blocked_stands_only_on_a_failure_this_run_recorded():
    """A check is blocked only by a check that failed on the same target; blocked by a check that passed, or that
    the run did not include (a narrowed --check), it fails with its own symptom and the run exits 1."""
    from layer_conformance.verdict import verdict
    blocked = _record("values", "blocked", message="not run: blocked by parameters (x)", blocked_by="parameters",
                   details={"symptom": "case 'a': values differ"})
    for others, what in (([_record("parameters", "passed")], "parameters passed"),
                         ([], "not part of this run")):
        judged = verdict([blocked, *others])
        values = next(r for r in judged.records if r.check == "values")
        assert values.outcome == "failed" and values.blocked_by == "", values
        assert "case 'a': values differ" in values.message and what in values.message, values.message
        assert int(judged.exit_code) == 1, judged.headline
    judged = verdict([blocked, _record("parameters", "failed", message="'gain' is untracked")])
    assert [r.outcome for r in judged.records] == ["blocked", "failed"]
    # in another dtype, blocked by the check in the cases' own dtype: that record is the one that counts
    in_bf16 = _record("gradients", "blocked", dtype="bfloat16", blocked_by="values",
                   details={"symptom": "s", "blocked_in_own_dtype": True})
    assert verdict([in_bf16, _record("values", "failed")]).records[0].outcome == "blocked"
    assert verdict([in_bf16, _record("values", "passed"), _record("values", "failed", dtype="bfloat16")]
                   ).records[0].outcome == "failed"
    # a chain: blocked by a check that is itself blocked by a failure stands
    chain = [_record("native", "blocked", blocked_by="values"), _record("values", "blocked", blocked_by="modes"),
             _record("modes", "failed")]
    assert [r.outcome for r in verdict(chain).records] == ["blocked", "blocked", "failed"]


def test_an_n_a_on_the_layers_word_is_listed_and_fails_under_strict_na_unless_an_entry_accepts_it(tmp_path):
    from layer_conformance.gate.expectations import load_expectations
    from layer_conformance.verdict import verdict
    na = _record("batching", "skipped", message="a custom Function without vmap rule", not_applicable=True,
              na_source="layer")
    trusted = _record("layout", "skipped", message="no strides", not_applicable=True, na_source="framework")
    judged = verdict([na, trusted, _record("values", "passed")])
    assert int(judged.exit_code) == 0 and [r for r, _ in judged.layer_na] == [na]
    assert any("batching" in text for text, _ in judged.lines())
    judged = verdict([na, trusted], strict_na=True)
    assert int(judged.exit_code) == 1 and "--strict-na" in judged.headline
    path = tmp_path / "expectations.yaml"
    path.write_text("- contract: rmsnorm\n  impl: m:L\n  framework: torch\n  check: batching\n  expected: n/a\n"
                    "  reason: the Function has no vmap rule on purpose\n")
    judged = verdict([na, trusted], expectations=load_expectations(path), strict_na=True)
    assert int(judged.exit_code) == 0 and judged.layer_na[0][1], judged.headline
    assert judged.records[0].status() == "n/a" and not judged.stale
