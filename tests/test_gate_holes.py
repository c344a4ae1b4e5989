"""The gate's holes, each shown closed: a green gate means checked and conformant.

Unit tests for the comparison, the expectations and the change lookup, then real runs in a temporary
git repository with a main branch and pull-request branches (torch, one custom-gradient function).
"""
import json
import sys
import textwrap

import pytest

from layer_conformance import changed, gate
from layer_conformance.record import Record
from layer_conformance.gate import ExpectationsError, compare, load_expectations
from tests.support import GRAD_BINDINGS, GRAD_LAYER, gate_run, git, git_branch, git_repo


def _rec(check, outcome, contract="centered", impl="mylayers:Centered", framework="torch", device="cpu", **kw):
    return Record(contract=contract, impl=impl, framework=framework, device=device, check=check, outcome=outcome,
                  message=kw.pop("message", ""), nodeid=f"x::{contract}::{check}", **kw)


# --- passed -> skipped / error ----------------------------------------------------------------

def test_a_check_that_passed_and_is_now_skipped_or_errors_is_a_regression():
    c = compare([_rec("values", "passed"), _rec("gradients", "passed")],
                [_rec("values", "skipped", message="skipped: no reference"), _rec("gradients", "error")])
    assert sorted(r.check for r in c.regressions) == ["gradients", "values"]
    assert [n.check for _, n in c.newly_skipped] == ["values"]
    assert "1 newly skipped" in c.summary()


def test_not_applicable_with_the_same_reason_on_both_sides_is_no_regression():
    na = dict(message="not applicable in mxnet: no hooks", not_applicable=True)
    c = compare([_rec("modes", "skipped", **na)], [_rec("modes", "skipped", **na)])
    assert c.regressions == [] and c.newly_skipped == []
    # a check that passed and is now declared n/a is a regression all the same
    c = compare([_rec("modes", "passed")], [_rec("modes", "skipped", **na)])
    assert [n.check for n in c.regressions] == ["modes"]


def test_a_baseline_record_of_any_outcome_that_is_gone_is_a_regression():
    old = [_rec("values", "passed"), _rec("gradients", "failed"), _rec("devices", "skipped")]
    c = compare(old, [])
    assert sorted(r.check for r in c.regressions) == ["devices", "gradients", "values"]
    assert "3 baseline check(s) no longer run" in c.summary()


# --- expectations -----------------------------------------------------------------------------

def _exp(tmp_path, text):
    p = tmp_path / "exp.yaml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("entry", ["{expected: fail, reason: r}", "{expected: fail, link: https://example.org/1}"])
def test_an_entry_without_key_fields_is_refused_with_file_and_line(tmp_path, entry):
    p = _exp(tmp_path, f"expectations:\n  - {{check: values, expected: fail, reason: r}}\n  - {entry}\n")
    with pytest.raises(ExpectationsError) as exc:
        load_expectations(p)
    assert f"{p}:3:" in str(exc.value) and "contract, impl, framework, device or check" in str(exc.value)


def test_stale_entries_are_those_matching_nothing_or_no_longer_failing(tmp_path):
    exps = load_expectations(_exp(tmp_path, """\
        - {check: values, expected: fail, reason: broken}
        - {check: gradients, expected: fail, reason: fixed since}
        - {check: devices, expected: fail, reason: now skipped}
        - {framework: mxnet, check: values, expected: fail, reason: not in this run}
        """))
    records = [_rec("values", "failed"), _rec("gradients", "passed"), _rec("devices", "skipped")]
    nothing, not_failing = gate.stale_expectations(exps, records)
    assert [e.reason for e in nothing] == ["not in this run"]
    assert [e.reason for e in not_failing] == ["fixed since", "now skipped"]


# --- the change lookup: the filesystem and a static import scan, never an import ----------------

def test_module_files_are_found_from_the_current_directory_without_importing(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("open('IMPORTED', 'w').write('x')\nraise SystemExit('user code ran')\n")
    (pkg / "layers.py").write_text("from . import helper\n")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert changed.module_file("mypkg.layers") == pkg / "layers.py"
    assert changed.module_file("mypkg.sub") == pkg / "sub" / "__init__.py"
    assert changed.module_file("mypkg.nothing") is None
    assert not (tmp_path / "IMPORTED").exists() and "mypkg" not in sys.modules


def test_the_import_scan_follows_absolute_relative_and_literal_dynamic_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "mypkg"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text("import torch\nfrom .ops import scale\ndef f():\n    import mypkg.late\n")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "scale.py").write_text("from ..consts import FACTOR\n")
    (pkg / "consts.py").write_text("FACTOR = 1.0\n")
    (pkg / "late.py").write_text("import importlib\nm = importlib.import_module('mypkg.dyn')\n")
    (pkg / "dyn.py").write_text("")
    (tmp_path / "unrelated.py").write_text("")
    monkeypatch.chdir(tmp_path)
    scan = changed.ImportScan(inside=lambda p: str(p).startswith(str(tmp_path)))
    files = scan.closure("mypkg.layers")
    names = {str(p.relative_to(tmp_path)) for p in files}
    assert names == {"mypkg/__init__.py", "mypkg/layers.py", "mypkg/ops/__init__.py", "mypkg/ops/scale.py",
                     "mypkg/consts.py", "mypkg/late.py", "mypkg/dyn.py"}
    # `from ..consts import FACTOR` may name a module too: an unresolved guess, not an error
    # (torch is missing too in an environment without it, such as the MXNet one: not this test's point)
    assert scan.unparseable == [] and [m for m, _ in scan.missing if m != "torch"] == ["mypkg.consts.FACTOR"]
    (pkg / "consts.py").write_text("FACTOR = (\n")
    scan = changed.ImportScan(inside=lambda p: str(p).startswith(str(tmp_path)))
    scan.closure("mypkg.layers")
    assert scan.unparseable == [pkg / "consts.py"]


# --- real runs in a git repository with branches -------------------------------------------------

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """main: one custom-gradient layer, its helper, bindings and a baseline from main's own green run."""
    pytest.importorskip("torch")
    repo = tmp_path_factory.mktemp("repo")
    (repo / "conformance").mkdir()
    (repo / "mylayers.py").write_text(GRAD_LAYER)
    (repo / "gradscale.py").write_text("FACTOR = 1.0\n")
    (repo / "conformance" / "bindings.yaml").write_text(GRAD_BINDINGS)
    (repo / "README.md").write_text("# layers\n")
    (repo / ".gitignore").write_text("out/\nbaseline.json\n__pycache__/\n")
    git_repo(repo)
    proc = gate_run(repo, "--conformance-json", "baseline.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return repo


def _selection(repo):
    return json.loads((repo / "out" / "r.json").read_text())["selection"]


def test_a_branch_that_halves_the_gradient_in_a_helper_fails_the_gate(repo):
    git_branch(repo, "halve", lambda r: (r / "gradscale.py").write_text("FACTOR = 0.5\n"))
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION: clipped_relu_grad mylayers:ClippedReLUGrad [torch-cpu] gradients: passed -> failed" \
        in proc.stdout
    sel = _selection(repo)
    assert sel["changed_files"] == ["gradscale.py"]
    assert sel["selected"] == [{"contract": "clipped_relu_grad", "impl": "mylayers:ClippedReLUGrad",
                                "because": ["gradscale.py changed (imported by mylayers)"]}]


def test_a_branch_that_changes_only_the_readme_passes_with_an_explicit_line(repo):
    git_branch(repo, "docs", lambda r: (r / "README.md").write_text("# layers\n\nmore words\n"))
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ("no layer changed since main: 1 file changed, none is an implementation, a contract, a module they "
            "import, or the bindings file") in proc.stdout
    assert "README.md: not an implementation" in proc.stdout
    assert "gate: no layer to check: exit 0" in proc.stdout
    sel = _selection(repo)
    assert sel["changed_files"] == ["README.md"] and sel["selected"] == []
    assert sel["unmapped"]["README.md"].startswith("not an implementation")


def test_a_broken_helper_selects_its_binding_and_fails(repo):
    git_branch(repo, "broken", lambda r: (r / "gradscale.py").write_text("FACTOR = (\n"))
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION" in proc.stdout and "SyntaxError" in proc.stdout
    assert _selection(repo)["selected"][0]["because"] == ["gradscale.py changed (imported by mylayers)"]


def test_a_deleted_implementation_file_selects_its_binding_and_fails(repo):
    git_branch(repo, "deleted", lambda r: (r / "mylayers.py").unlink())
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION" in proc.stdout
    assert _selection(repo)["selected"][0]["because"] == ["mylayers.py was deleted"]


def test_a_removed_binding_is_a_regression_against_the_baseline(repo):
    git_branch(repo, "unbind", lambda r: (r / "conformance" / "bindings.yaml").write_text("bindings: []\n"))
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION: clipped_relu_grad mylayers:ClippedReLUGrad [torch-cpu] gradients: passed in the baseline, " \
           "not run now" in proc.stdout
    assert "none selects a binding (the bindings file only removes entries)" in proc.stdout
    assert _selection(repo)["unmapped"] == {"conformance/bindings.yaml": _selection(repo)["unmapped"][
        "conformance/bindings.yaml"]} and "removed entry" in _selection(repo)["unmapped"]["conformance/bindings.yaml"]


def test_an_added_binding_is_selected_and_untouched_ones_are_not(repo):
    def add(r):
        (r / "other.py").write_text(GRAD_LAYER.replace("from gradscale import FACTOR", "FACTOR = 1.0"))
        (r / "conformance" / "bindings.yaml").write_text(
            GRAD_BINDINGS + "  - {contract: clipped_relu_grad, impl: \"other:ClippedReLUGrad\", framework: torch}\n")
    git_branch(repo, "add", add)
    proc = gate_run(repo, "--changed-since", "main", "--baseline", "baseline.json", "--conformance-json", "out/r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sel = _selection(repo)
    assert [s["impl"] for s in sel["selected"]] == ["other:ClippedReLUGrad"]
    assert {r["impl"] for r in json.loads((repo / "out" / "r.json").read_text())["results"]} == \
        {"other:ClippedReLUGrad"}


def test_a_whole_frameworks_bindings_gone_is_a_regression(repo, tmp_path):
    base = json.loads((repo / "baseline.json").read_text())
    tf = [dict(r, framework="tensorflow", impl="tflayers:ClippedReLUGrad") for r in base["results"]]
    (tmp_path / "both.json").write_text(json.dumps(dict(base, results=base["results"] + tf)))
    git(repo, "checkout", "-q", "main")
    proc = gate_run(repo, "--baseline", str(tmp_path / "both.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "clipped_relu_grad tflayers:ClippedReLUGrad [tensorflow-cpu] gradients: passed in the baseline, " \
           "not run now" in proc.stdout


def test_strict_expectations_fail_on_an_entry_matching_nothing(repo, tmp_path):
    (tmp_path / "exp.yaml").write_text("- {contract: no_such_contract, check: values, expected: fail, reason: stale}\n")
    git(repo, "checkout", "-q", "main")
    proc = gate_run(repo, "--expectations", str(tmp_path / "exp.yaml"), "--strict-expectations")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "exp.yaml:1: the entry for contract=no_such_contract, check=values matches no check in this run" \
        in proc.stdout
    assert "--strict-expectations: 1 stale expectations entry" in proc.stdout
    proc = gate_run(repo, "--expectations", str(tmp_path / "exp.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_expectations_file_with_a_keyless_entry_is_a_usage_error(repo, tmp_path):
    (tmp_path / "exp.yaml").write_text("expectations:\n  - {expected: fail, reason: everything}\n")
    git(repo, "checkout", "-q", "main")
    proc = gate_run(repo, "--expectations", str(tmp_path / "exp.yaml"))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "exp.yaml:2:" in proc.stderr
