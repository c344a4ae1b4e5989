"""Quiet output and the gate on a user's first pull request, each run the user's way (pytest in a directory of
the user's own): the output says what the run left out, and nothing it need not say."""
import importlib.util
import re
import textwrap

import pytest

from tests.support import (GRAD_BINDINGS, GRAD_LAYER, USER_LAYER, USER_LAYERS, gate_run, git, git_repo, pytest_run,
                           torch_rmsnorm, user_package)

requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        conformance_contract = ["rmsnorm"]
        conformance_impl = "mypkg.layers:RMSNorm"
    """))
    user_package(tmp_path, USER_LAYER)
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
    from layer_conformance.gate import load_expectations
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
    repo = tmp_path / "repo"
    (repo / "conformance").mkdir(parents=True)
    (repo / "mylayers.py").write_text(GRAD_LAYER)
    (repo / "other.py").write_text(GRAD_LAYER.replace("from gradscale import FACTOR", "FACTOR = 1.0"))
    (repo / "gradscale.py").write_text("FACTOR = 1.0\n")
    (repo / "conformance" / "bindings.yaml").write_text(
        GRAD_BINDINGS + "  - {contract: clipped_relu_grad, impl: \"other:ClippedReLUGrad\", framework: torch}\n")
    (repo / "expectations.yaml").write_text(textwrap.dedent("""\
        expectations:
          - {impl: "other:*", check: values, expected: fail, reason: about the binding left out}
          - {contract: no_such_contract, expected: fail, reason: about nothing}
    """))
    git_repo(repo)
    git(repo, "checkout", "-qb", "pr")
    (repo / "gradscale.py").write_text("FACTOR = 1.0  # unchanged value\n")
    git(repo, "commit", "-qam", "touch the helper")
    # the entries are globs and one names no check: the flag that allows them
    proc = gate_run(repo, "--changed-since", "main", "--expectations", "expectations.yaml", "--allow-glob-expectations")
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
    from layer_conformance import results
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


# -- what executors write to stderr: kept out of the terminal, its tail in a failing check's record ---------------

requires_keras = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                    or importlib.util.find_spec("tensorflow") is None, reason="needs keras on tf")
# lines no run of a correct layer may show: TensorFlow's and absl's C++ logs, oneDNN's notice, TF's Python warnings
FRAMEWORK_LOG = re.compile(r"^[IWEF]\d{4} |absl|oneDNN|cpu_feature_guard|WARNING:tensorflow", re.MULTILINE)
RETRACING = "triggered tf.function retracing"


def _keras_user(tmp_path, source):
    (tmp_path / "mylayer.py").write_text(USER_LAYERS["tensorflow"] + source)
    return ("--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--arg-map", "d=", "--dtype", "float32",
            "--conformance-json", "r.json")


@requires_keras
def test_a_correct_keras_layers_run_shows_no_framework_log(tmp_path):
    """The executors (layer, native, the zygote and the fresh processes export forks) print none of TensorFlow's
    start-up logs; the harness's own tracing in `compiled` (a program per case shape) warns of no retracing."""
    args = _keras_user(tmp_path, "")
    proc = pytest_run(*args, "--check", "values", "--check", "compiled", "--check", "export", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "3 passed" in out, out[-3000:]
    assert not FRAMEWORK_LOG.search(out), FRAMEWORK_LOG.search(out).group(0) + "\n" + out[-3000:]


SAYS_COMPILED = textwrap.dedent("""\


    class SaysCompiled(RMSNorm):
        \"\"\"Right eagerly, wrong under tf.function, and says so on stderr every time it is traced.\"\"\"
        def call(self, x):
            import sys
            import tensorflow as tf
            if tf.executing_eagerly():
                return super().call(x)
            print("SAYS-COMPILED-7f3a", file=sys.stderr)
            return super().call(x) * 1.5
""")


@requires_keras
def test_a_failing_keras_check_keeps_the_layers_stderr_and_no_harness_warning(tmp_path):
    """The layer's words reach the failing check's record (details.stderr_tail), not the terminal; the harness's
    own retracing of its traced gradient step, which ran all the check's cases, is not among them."""
    from layer_conformance import results
    args = _keras_user(tmp_path, SAYS_COMPILED)
    args = tuple(a.replace("mylayer:RMSNorm", "mylayer:SaysCompiled") for a in args)
    proc = pytest_run(*args, "--check", "compiled", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "1 failed" in out, out[-3000:]
    assert "SAYS-COMPILED-7f3a" not in out and not FRAMEWORK_LOG.search(out), out[-3000:]
    [rec] = [r for r in results.load(tmp_path / "r.json")["results"] if r.check == "compiled"]
    assert rec.outcome == "failed", rec
    tail = rec.details["stderr_tail"]
    assert "SAYS-COMPILED-7f3a" in tail and RETRACING not in tail and not FRAMEWORK_LOG.search(tail), tail[-3000:]


# the user's RMSNorm, loud
LOUD = torch_rmsnorm() + textwrap.dedent("""\

    import os
    import sys
    import warnings

    class Loud(RMSNorm):
        \"\"\"Right, and writes 10 MB to stderr in every forward, from Python and from the descriptor alike.\"\"\"
        def forward(self, X):
            sys.stderr.write("loud " * (1 << 20))
            sys.stderr.flush()
            os.write(2, b"LOUDER " * (3 << 19))
            return super().forward(X)

    class Marked(Loud):
        \"\"\"Wrong (no eps): after its first call's noise, says a marker and a warning (Python shows it once).\"\"\"
        noisy = True

        def forward(self, X):
            if Marked.noisy:
                super().forward(X)
                Marked.noisy = False
            print("MARKER-b41d", file=sys.stderr)
            warnings.warn("MARKED-WARNING-9c2e: this layer leaves out eps")
            return self.gain * X * X.pow(2).mean(-1, keepdim=True).rsqrt()
""")


@requires_torch
def test_a_layer_that_floods_stderr_does_not_reach_the_output(tmp_path):
    (tmp_path / "loud.py").write_text(LOUD)
    proc = pytest_run("--contract", "rmsnorm", "--impl", "loud:Loud", "--dtype", "float32", "--check", "values",
                      "--check", "parameters", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "2 passed" in out, out[-3000:]
    assert len(out) < 20_000 and "loud" not in out.replace("loud:Loud", "").replace("loud.py", ""), out[-3000:]


@requires_torch
def test_a_failing_check_keeps_the_last_of_the_layers_stderr_with_its_warnings(tmp_path):
    """A bounded tail (the last 64 KiB) of what the layer wrote in the check, its own Python warning included."""
    from layer_conformance import results
    (tmp_path / "loud.py").write_text(LOUD)
    proc = pytest_run("--contract", "rmsnorm", "--impl", "loud:Marked", "--dtype", "float32", "--check", "values",
                      "--conformance-json", "r.json", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "1 failed" in out, out[-3000:]
    assert len(out) < 20_000 and "MARKER-b41d" not in out, out[-3000:]
    [rec] = [r for r in results.load(tmp_path / "r.json")["results"] if r.check == "values"]
    assert rec.outcome == "failed", rec
    tail = rec.details["stderr_tail"]
    assert 0 < len(tail.encode()) <= 64 << 10, len(tail)
    assert "MARKER-b41d" in tail and "UserWarning: MARKED-WARNING-9c2e" in tail, tail[-2000:]
