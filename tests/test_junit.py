"""JUnit output as a CI service reads it: parsed with junitparser, a JUnit consumer's own parser."""
import importlib.util
import json
import textwrap

import pytest

from layer_conformance.contract import find_contract
from layer_conformance.outputs.junit import junit_names
from tests.support import USER_LAYER, pytest_run, user_package

junitparser = pytest.importorskip("junitparser", reason="junitparser is not installed (pip install -e .[test])")
Error, Failure, JUnitXml, Skipped = junitparser.Error, junitparser.Failure, junitparser.JUnitXml, junitparser.Skipped
requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

BUGGY = textwrap.dedent("""\

    class BuggyRMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.gain = torch.ones(d)          # a plain tensor: no optimizer sees it
            self.eps = eps

        def forward(self, X):
            return self.gain * X * X.to(torch.promote_types(X.dtype, torch.float32)).pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt().to(X.dtype)
""")
CHECKS = ["parameters", "serialization", "values", "buffers"]


def test_names_split_at_the_check():
    assert junit_names("specs/rmsnorm.yaml::rmsnorm[BuggyRMSNorm-torch-cpu]::parameters") == \
        ("specs.rmsnorm.rmsnorm[BuggyRMSNorm-torch-cpu]", "parameters")
    # the form pytest's NodeId gives back for such an id, with the stray bracket at the end
    assert junit_names("specs/rmsnorm.yaml::rmsnorm[BuggyRMSNorm-torch-cpu]::parameters]") == \
        ("specs.rmsnorm.rmsnorm[BuggyRMSNorm-torch-cpu]", "parameters")
    assert junit_names("../../lib/specs/x.yml::x[mypkg.a.L-jax-cuda]::values", "ci") == \
        ("ci.lib.specs.x.x[mypkg.a.L-jax-cuda]", "values")
    assert junit_names("tests/test_x.py::test_a[1-torch-cpu]") is None     # the user's own tests keep pytest's
    assert junit_names("tests/test_x.py::TestA::test_b") is None


@pytest.fixture
def project(tmp_path):
    user_package(tmp_path, USER_LAYER + BUGGY)
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "rmsnorm.yaml").write_text(find_contract("rmsnorm").read_text())
    (tmp_path / "bindings.yaml").write_text(textwrap.dedent("""\
        - {contract: contracts/rmsnorm.yaml, impl: "mypkg.layers:RMSNorm"}
        - {contract: contracts/rmsnorm.yaml, impl: "mypkg.layers:BuggyRMSNorm"}
    """))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text("def test_mine():\n    assert 2 * 2 == 4\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def _cases(path):
    xml = JUnitXml.fromfile(str(path))
    suites = [xml] if xml._tag == "testsuite" else list(xml)
    cases = [c for s in suites for c in s]
    return suites, cases


def _kind(case):
    kinds = {type(r) for r in case.result}
    return "failed" if Failure in kinds else "error" if Error in kinds else "skipped" if Skipped in kinds else "passed"


@requires_torch
@pytest.mark.parametrize("workers", ["0", "2"])
def test_junit_names_and_counts_read_by_junitparser(project, workers):
    args = ["--bindings", "bindings.yaml", "--junitxml", "junit.xml", "-o", "junit_family=xunit2",
            "--conformance-json", "out.json", "-n", workers, "tests"]
    for c in CHECKS:
        args += ["--check", c]
    proc = pytest_run(*args, cwd=project)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    suites, cases = _cases(project / "junit.xml")
    got = {(c.classname, c.name): _kind(c) for c in cases}
    # a check the contract never asks for is no item (n/a in the results file only)
    records = [r for r in json.loads((project / "out.json").read_text())["results"] if not r.get("not_applicable")]
    # a blocked check is a skip in JUnit, with its "not run: blocked by ..." message
    # rmsnorm declares dtypes: values runs again in each dtype it adds, a target of its own
    want = {(f"contracts.rmsnorm.rmsnorm[{r['impl'].rpartition(':')[2]}-torch-cpu"
             f"{'-' + r['dtype'] if r.get('dtype') else ''}]", r["check"]):
            "skipped" if r["outcome"] == "blocked" else r["outcome"] for r in records}
    want[("tests.test_mine", "test_mine")] = "passed"
    assert got == want
    assert len(cases) == len(records) + 1
    # the counts a CI service shows: one per failed check, the user's own test among the passes
    failed = sum(r["outcome"] == "failed" for r in records)
    # one mistake, one failure (the checks resting on it are blocked: skips with the reason)
    assert failed >= 1 and sum(s.failures for s in suites) == failed
    assert sum(s.errors for s in suites) == 0 and sum(s.tests for s in suites) == len(cases)
    assert sum(s.skipped for s in suites) == sum(r["outcome"] in ("skipped", "blocked") for r in records)
    assert got[("contracts.rmsnorm.rmsnorm[BuggyRMSNorm-torch-cpu]", "parameters")] == "failed"
    assert got[("contracts.rmsnorm.rmsnorm[RMSNorm-torch-cpu]", "parameters")] == "passed"
    buggy = next(c for c in cases if c.name == "parameters" and "Buggy" in c.classname)
    assert "nn.Parameter" in buggy.result[0].message
    for case in cases:
        assert "::" not in case.name and "[" not in case.name and "]" not in case.name
        assert case.classname.count("[") == case.classname.count("]") <= 1


@requires_torch
def test_a_dtype_the_contract_adds_reads_in_the_testcase(tmp_path):
    """centered declares dtypes: each added dtype is a testcase class of its own, the cases' own keeps its name."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = pytest_run("--contract", "centered", "--framework", "torch", "--check", "values", "--junitxml",
                      "junit.xml", "-o", "junit_family=xunit2", "-n", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _, cases = _cases(tmp_path / "junit.xml")
    got = {(c.classname.rpartition(".")[2], c.name): _kind(c) for c in cases}
    assert got == {(f"centered[torch-cpu{'-' + d if d else ''}]", "values"): "passed"
                   for d in ("", "bfloat16", "float16", "float64")}
