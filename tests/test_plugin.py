"""The plugin as a user meets it: command line, results file, xdist, lazy imports, JUnit."""
import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import importlib.util

import pytest

from layer_conformance import results
from tests.support import ROOT, USER_LAYER, git, pytest_run, user_package

requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@pytest.fixture
def user_pkg(tmp_path):
    return user_package(tmp_path, USER_LAYER)


@requires_torch
def test_user_layer_outside_the_repo(user_pkg):
    proc = pytest_run("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--conformance-json", "out.json",
                      "-v", cwd=user_pkg)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rmsnorm[RMSNorm-torch-cpu]::serialization PASSED" in proc.stdout
    assert "mypkg.layers:RMSNorm [torch] from " in proc.stdout    # the header echoes the resolved implementation
    assert str(user_pkg / "mypkg" / "layers.py") in proc.stdout
    assert "seed 0" in proc.stdout and "torch 2." in proc.stdout  # ... the seed and framework versions
    doc = results.load(user_pkg / "out.json")
    assert doc["schema_version"] == results.SCHEMA_VERSION and doc["environment"]["frameworks"]["torch"].startswith("2.")
    outcomes = {r.check: r.outcome for r in doc["results"]}
    assert outcomes["values"] == "passed" and outcomes["native"] == "passed"
    assert {r.impl for r in doc["results"]} == {"mypkg.layers:RMSNorm"}
    # every check's wall time is written (the report shows it)
    # (a check the contract never asks for is no item: its n/a record has no time; a check that ran and found
    # itself n/a, such as construction on a layer without factory keywords or reset_parameters, has its time)
    assert all(isinstance(r.duration, float) and r.duration > 0 for r in doc["results"] if r.status() != "n/a")
    assert any(r.status() == "n/a" and r.duration is None for r in doc["results"])
    assert all(r.duration is None or r.duration > 0 for r in doc["results"])


@requires_torch
def test_broken_user_layer_names_the_case_and_exits_1(user_pkg):
    proc = pytest_run("--contract", "rmsnorm", "--impl", "mypkg.layers:Broken", "--check", "values", cwd=user_pkg)
    assert proc.returncode == 1
    assert "rmsnorm[Broken-torch-cpu]::values failed: case 'edge_rows': mismatched elements" in proc.stdout


@requires_torch
@pytest.mark.parametrize("impl,expected", [
    ("nosuchmodule:Layer", "cannot import module 'nosuchmodule'"),
    ("mypkg.layers:Nope", "module 'mypkg.layers' has no attribute 'Nope'"),
    ("mypkg.layers", "expected MODULE:ATTR"),
])
def test_bad_impl_is_one_clear_usage_error(user_pkg, impl, expected):
    proc = pytest_run("--contract", "rmsnorm", "--impl", impl, cwd=user_pkg)
    assert proc.returncode == 4
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def _results(path):
    return [{k: v for k, v in r.items() if k != "duration"} for r in json.loads(Path(path).read_text())["results"]]


@requires_torch
def test_xdist_gives_the_same_verdicts_and_numbers(tmp_path):
    a, b = tmp_path / "n0.json", tmp_path / "n2.json"
    # a layer, one with a non-trainable buffer, one with modes and a function with a surrogate gradient: every
    # kind of target (the whole matrix would only repeat them)
    some = [a for c in ("rmsnorm", "causal_mask", "dropout", "round_ste") for a in ("--contract", c)]
    p0 = pytest_run("--framework", "torch", *some, "-n", "0", "--conformance-json", a)
    p2 = pytest_run("--framework", "torch", *some, "-n", "2", "--conformance-json", b)
    assert p0.returncode == p2.returncode == 0, p0.stdout[-2000:] + p2.stdout[-2000:]
    ra, rb = _results(a), _results(b)
    assert len(ra) > 50
    assert ra == rb   # same ids, outcomes, messages and numbers (timings aside)


ALONE = {
    "torch": ("tensorflow", "keras", "jax", "jaxlib", "flax", "mxnet"),
    "tensorflow": ("torch", "jax", "jaxlib", "flax", "mxnet"),
    "jax": ("torch", "tensorflow", "keras", "mxnet"),
}


@pytest.mark.parametrize("framework", list(ALONE))
def test_one_framework_installed_alone(tmp_path, framework):
    """Block the other frameworks as if they were not installed: the bundled run covers the one
    framework left and none of the others is ever imported."""
    pytest.importorskip({"jax": "flax"}.get(framework, framework))
    script = textwrap.dedent(f"""\
        import importlib.machinery, sys
        BLOCKED = {ALONE[framework]!r}
        # as if not installed: the path finder finds no spec (find_spec gives None, import fails)
        _find = importlib.machinery.PathFinder.find_spec
        def find_spec(cls, name, path=None, target=None):
            return None if name.split(".")[0] in BLOCKED else _find(name, path, target)
        importlib.machinery.PathFinder.find_spec = classmethod(find_spec)
        import pytest
        rc = pytest.main(["-p", "no:cacheprovider", "-q", "--conformance-json", {str(tmp_path / "r.json")!r},
                          "--contract", "rmsnorm", "--contract", "causal_mask", "--contract", "round_ste"])
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        print("LEAKED", leaked)
        sys.exit(rc if not leaked else 99)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "LEAKED []" in proc.stdout
    frameworks = {r["framework"] for r in _results(tmp_path / "r.json")}
    assert frameworks == {framework}


@requires_torch
def test_junit_xml_stays_xunit2(tmp_path):
    xml = tmp_path / "junit.xml"
    proc = pytest_run("--framework", "torch", "--contract", "rmsnorm", "--junitxml", xml, "-o", "junit_family=xunit2")
    assert proc.returncode == 0, proc.stdout[-2000:]
    root = ET.parse(xml).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) >= 8
    # xunit2 allows no <properties> inside a testcase
    assert not [c for c in cases if c.find("properties") is not None]
    names = {(c.get("classname"), c.get("name")) for c in cases}
    assert ("specs.rmsnorm.rmsnorm[torch-cpu]", "values") in names   # no stray bracket (tests/test_junit.py)
    assert ("specs.rmsnorm.rmsnorm[torch-cpu]", "serialization") in names


@requires_torch
def test_unknown_framework_and_check_are_usage_errors():
    p = pytest_run("--framework", "caffe")
    assert p.returncode == 4 and "known frameworks are" in p.stderr
    p = pytest_run("--framework", "torch", "--check", "nonsense")
    assert p.returncode == 4 and "known checks are" in p.stderr


@requires_torch
def test_harness_test_files_are_not_pulled_into_an_impl_run(user_pkg):
    (user_pkg / "test_unrelated.py").write_text("def test_should_not_run():\n    raise SystemExit(3)\n")
    proc = pytest_run("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--collect-only", "-q",
                      cwd=user_pkg)
    assert "test_should_not_run" not in proc.stdout
    assert "rmsnorm[RMSNorm-torch-cpu]::values" in proc.stdout, proc.stdout + proc.stderr


@requires_torch
def test_changed_since_keeps_only_the_layers_a_change_touched(user_pkg):
    """--changed-since REV: a pull request gates only the layers (or contracts) it changed."""
    (user_pkg / "mypkg" / "other.py").write_text(USER_LAYER)
    (user_pkg / "bindings.yaml").write_text(textwrap.dedent("""\
        - {contract: rmsnorm, impl: "mypkg.layers:RMSNorm"}
        - {contract: rmsnorm, impl: "mypkg.other:RMSNorm"}
    """))
    git(user_pkg, "init", "-q")
    git(user_pkg, "commit", "-qam", "layers", "--allow-empty")
    git(user_pkg, "add", ".")
    git(user_pkg, "commit", "-qm", "layers")
    proc = pytest_run("--bindings", "bindings.yaml", "--changed-since", "HEAD", "--collect-only", "-q", cwd=user_pkg)
    assert proc.returncode == 0 and "collected" not in proc.stdout.replace("no tests collected", ""), proc.stdout
    (user_pkg / "mypkg" / "other.py").write_text(USER_LAYER + "\n# changed\n")
    proc = pytest_run("--bindings", "bindings.yaml", "--changed-since", "HEAD", "--collect-only", "-q", cwd=user_pkg)
    assert "rmsnorm[mypkg.other.RMSNorm-torch-cpu]::values" in proc.stdout or \
        "rmsnorm[RMSNorm-torch-cpu]::values" in proc.stdout, proc.stdout
    assert "mypkg.layers" not in proc.stdout
