"""Quiet output and the gate on a user's first pull request, each run the user's way (pytest in a directory of
the user's own): the output says what the run left out, and nothing it need not say."""
import importlib.util
import textwrap

import pytest

from tests.test_plugin import USER_LAYER, pytest_run

requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        conformance_contract = ["rmsnorm"]
        conformance_impl = "mypkg.layers:RMSNorm"
    """))
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "layers.py").write_text(USER_LAYER)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text("def test_mine():\n    assert sum([1, 2]) == 3\n")
    return tmp_path


LEFT_OUT = "are not part of this run"


def test_a_run_of_the_testpaths_says_once_that_the_checks_are_left_out(project):
    proc = pytest_run("tests", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count(LEFT_OUT) == 1, out[-3000:]
    line = next(x for x in out.splitlines() if LEFT_OUT in x)
    assert "conformance_impl" in line and "pytest -m conformance" in line, line


def test_deselecting_the_checks_on_purpose_is_not_told_again(project):
    proc = pytest_run("tests", "-m", "not conformance", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert LEFT_OUT not in out, out[-3000:]


@requires_torch
def test_a_run_that_holds_the_checks_does_not_say_they_are_left_out(project):
    proc = pytest_run("--check", "parameters", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "2 passed" in out and LEFT_OUT not in out, out[-3000:]


REFUSING = textwrap.dedent("""\
    from torch import nn

    class Centered(nn.Module):
        def forward(self, X):
            raise ValueError("this layer refuses every input it is given, whatever its shape, its dtype, its device "
                             "or the phase of the moon may be, and says so at some length")
""")


@requires_torch
def test_update_expectations_records_every_failure_exits_0_and_stores_portable_reasons(tmp_path):
    """The layer lives in an installed environment outside the project (its site-packages): the stored reason
    names its file from the package on, and is cut between words."""
    from harness.gate import load_expectations
    site = tmp_path / "env" / "lib" / "python3.x" / "site-packages"
    (site / "mypkg").mkdir(parents=True)
    (site / "mypkg" / "__init__.py").write_text("")
    (site / "mypkg" / "raising.py").write_text(REFUSING)
    project = tmp_path / "project"
    project.mkdir()
    proc = pytest_run("--contract", "centered", "--impl", "mypkg.raising:Centered", "--check", "parameters",
                      "--expectations", "expectations.yaml", "--update-expectations", cwd=project,
                      env={"PYTHONPATH": str(site)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "1 added" in out and "recorded as expected" in out, out[-3000:]
    [entry] = load_expectations(project / "expectations.yaml")
    assert entry.patterns["check"] == "parameters", entry
    reason = entry.reason
    assert "ValueError: this layer refuses" in reason, reason
    assert str(tmp_path) not in reason and "site-packages" not in reason, reason
    # cut at a word boundary, with a mark that it was cut
    assert reason.endswith("...") and reason[:-3].split(" ")[-1] in REFUSING.split(), reason
    rerun = pytest_run("--contract", "centered", "--impl", "mypkg.raising:Centered", "--check", "parameters",
                       "--expectations", "expectations.yaml", cwd=project, env={"PYTHONPATH": str(site)})
    assert rerun.returncode == 0 and "1 xfailed" in rerun.stdout, rerun.stdout[-3000:] + rerun.stderr[-3000:]


@requires_torch
def test_changed_since_is_silent_about_the_expectations_of_bindings_it_left_out(tmp_path):
    """A pull request that touches one of two bindings: the other's expectations entry is not stale, it is
    about a binding the harness chose not to run; an entry that names no binding at all is still told."""
    from tests.test_gate_holes import BINDINGS, LAYER, _gate, _git
    repo = tmp_path / "repo"
    (repo / "conformance").mkdir(parents=True)
    (repo / "mylayers.py").write_text(LAYER)
    (repo / "other.py").write_text(LAYER.replace("from gradscale import FACTOR", "FACTOR = 1.0"))
    (repo / "gradscale.py").write_text("FACTOR = 1.0\n")
    (repo / "conformance" / "bindings.yaml").write_text(
        BINDINGS + "  - {contract: clipped_relu_grad, impl: \"other:ClippedReLUGrad\", framework: torch}\n")
    (repo / "expectations.yaml").write_text(textwrap.dedent("""\
        expectations:
          - {impl: "other:*", check: values, expected: fail, reason: about the binding left out}
          - {contract: no_such_contract, expected: fail, reason: about nothing}
    """))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "layers")
    _git(repo, "checkout", "-qb", "pr")
    (repo / "gradscale.py").write_text("FACTOR = 1.0  # unchanged value\n")
    _git(repo, "commit", "-qam", "touch the helper")
    proc = _gate(repo, "--changed-since", "main", "--expectations", "expectations.yaml")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "1 binding(s) selected, 1 untouched" in out, out[-3000:]
    assert "impl=other:*" not in out, out[-3000:]
    assert "the entry for contract=no_such_contract matches no check in this run" in out, out[-3000:]


@requires_torch
def test_a_check_the_contract_never_asks_for_is_no_item_and_stays_n_a_in_the_matrix(tmp_path):
    """clipped_relu_grad is a function contract without forward mode: `parameters` and `forward_mode` can never
    run there. pytest collects no item for them (so `skipped` means "could run, but not here"); the results
    file and the HTML still show them n/a with the contract's reason, outside the plan."""
    from harness import results
    proc = pytest_run("-v", "--contract", "clipped_relu_grad", "--framework", "torch", "--dtype", "float32",
                      "--check", "values", "--check", "forward_mode", "--check", "parameters",
                      "--conformance-json", "r.json", "--conformance-html", "r.html", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "1 passed in" in out and "skipped" not in out.split("layer conformance")[0], out[-3000:]
    assert "::forward_mode" not in out and "::parameters" not in out, out[-3000:]
    doc = results.load(tmp_path / "r.json")
    assert doc["planned"] == 1 and doc["complete"] is True, doc
    by_check = {r.check: r for r in doc["results"]}
    assert by_check["values"].outcome == "passed"
    for check, reason in [("forward_mode", "the contract does not ask for forward mode"),
                          ("parameters", "a function contract has no layer state")]:
        r = by_check[check]
        assert (r.status(), r.message) == ("n/a", reason), r
        assert r.nodeid == by_check["values"].nodeid.replace("::values", f"::{check}"), r.nodeid
    html = (tmp_path / "r.html").read_text()
    assert "the contract does not ask for forward mode" in html
