"""A broken contract gets a clear answer: every problem at once, each with file, line and field,
from the loader API and from the command line (exit code 3, no traceback).

Each fixture in tests/hostile_contracts/ states what it must produce in its header:
``# expect: LINE: FIELD: MESSAGE-FRAGMENT`` (``# expect[torch]:`` only where torch is installed).
"""
import re
from pathlib import Path

import pytest

from layer_conformance.frameworks import FRAMEWORKS, installed
from layer_conformance.checks import CHECKS
from layer_conformance.contract import (CHECK_IDS, Contract, ContractError, ContractNotFound,
                              bundled_contracts, find_contract)
from layer_conformance.reference_check import load_checked  # as a run loads a contract: its reference run too
from tests.support import ROOT, pytest_run

HOSTILE = Path(__file__).resolve().parent / "hostile_contracts"
EXPECT = re.compile(r"^# expect(?:\[(\w+)\])?: (\d+): (.+?): (.+)$")
HAS_TORCH = installed("torch")


def _expectations(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        m = EXPECT.match(line)
        if m and (m.group(1) is None or installed(m.group(1))):
            out.append((int(m.group(2)), m.group(3), m.group(4)))
    return out


FIXTURES = sorted(p for p in HOSTILE.glob("*.yaml") if _expectations(p))


def test_every_bundled_contract_loads():
    for name, path in bundled_contracts().items():
        assert isinstance(load_checked(path), Contract), name


def test_every_check_can_be_named_in_a_contract():
    # the schema's check ids are the catalog's (tests/meta_tests/test_check_declarations.py)
    assert CHECK_IDS == tuple(CHECKS)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_hostile_contract_lists_every_problem(path, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a YAML tag that ran a command would leave its file here
    # the fixtures' reference modules (tests.hostile_contracts.*), imported as a user's are: from PYTHONPATH
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    expected = _expectations(path)
    with pytest.raises(ContractError) as info:
        load_checked(path)
    exc = info.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)  # nothing chained
    got = [(line, fld, msg) for line, fld, msg in exc.problems]
    assert len(got) == len(expected), f"expected {len(expected)} problems, got:\n{exc}"
    text = str(exc)
    assert text.startswith(f"invalid contract ({len(expected)} problem")
    for line, fld, fragment in expected:
        assert any(g[0] == line and g[1] == fld and fragment in g[2] for g in got), \
            f"no problem at line {line}, field {fld} containing {fragment!r}:\n{exc}"
        assert f"{path}:{line}: {fld}: " in text
    assert not list(tmp_path.iterdir()), "loading the contract had a side effect"


def test_a_file_that_is_not_text_or_not_there(tmp_path):
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"name: rmsnorm\ndescription: caf\xe9\n")
    with pytest.raises(ContractError, match=r"latin1.yaml:2: \(file\): not UTF-8 text"):
        load_checked(latin1)
    with pytest.raises(ContractError, match=r"cannot read"):
        load_checked(HOSTILE)  # a directory
    with pytest.raises(ContractNotFound, match="no such contract file"):
        find_contract(str(HOSTILE / "missing.yaml"))
    with pytest.raises(ContractNotFound, match="bundled contracts are .*rmsnorm.*path to a contract of your own"):
        find_contract("rmsnrom")


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_missing_native_class_is_reported_by_the_native_check_with_file_and_line(session):
    from layer_conformance.runner import context_for, run_check
    path = HOSTILE / "native_class_missing.yaml"
    contract = load_checked(path)  # torch exists: whether torch.nn has the class needs an import
    rec = run_check(context_for(contract, "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch",
                                session=session), "native")
    assert rec["outcome"] == "failed"
    assert "torch.nn.RMSNormm" in rec["message"] and f"{path}:{contract.line('native', 'torch', 'class')}" \
        in rec["message"], rec["message"]


# --- the command line: a few subprocess runs (each ~2 s) ----------------------------------

ON_PATH = {"PYTHONPATH": str(ROOT)}   # the runs import this repository's modules


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
def test_cli_broken_contract_exits_3_with_every_problem_and_no_traceback():
    path = HOSTILE / "three_problems.yaml"
    proc = pytest_run("--contract", str(path), "--impl", "layer_conformance.reference_impls.torch.rmsnorm:IMPL",
                      env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "Traceback" not in out
    for line, fld, fragment in _expectations(path):
        assert f"{path}:{line}: {fld}: " in out and fragment in out, out


def test_cli_every_broken_contract_is_reported_before_collection(tmp_path):
    # Two broken contracts in one run, one of them hostile: both reported, nothing collected or run.
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text(
        f"- {{contract: {HOSTILE / 'python_tag.yaml'}, impl: 'layer_conformance.reference_impls.torch.centered:IMPL', framework: torch}}\n"
        f"- {{contract: {HOSTILE / 'negative_tolerances.yaml'}, impl: 'layer_conformance.reference_impls.torch.centered:IMPL', "
        f"framework: torch}}\n")
    proc = pytest_run("--bindings", str(bindings), cwd=tmp_path, env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "collected" not in out
    assert "python_tag.yaml:5: name: refused YAML tag '!!python/object/apply:os.system'" in out
    assert "negative_tolerances.yaml:16: tolerances.checks.values.float64.rtol: nan is not a finite number" in out
    assert not (tmp_path / "HOSTILE_TAG_RAN").exists()


@pytest.mark.skipif(not installed("tensorflow"), reason="needs tensorflow")
def test_cli_native_call_naming_an_unknown_input_exits_3_said_once():
    # native.<fw>.call is read at load, before any check: its problems are the contract's (exit 3), each said once
    path = HOSTILE / "native_call.yaml"
    proc = pytest_run("--contract", str(path), "--impl",
                      "layer_conformance.reference_impls.tensorflow.rmsnorm:IMPL", env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "collected" not in out
    for line, fld, fragment in _expectations(path):
        assert out.count(f"{path}:{line}: {fld}: ") == 1 and fragment in out, out


def test_cli_unknown_contract_name_is_a_usage_error():
    proc = pytest_run("--contract", "rmsnrom", "--framework", "torch", env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "no bundled contract named 'rmsnrom'" in out and "Traceback" not in out


# --- bounds: each refused at load, from the command line too ------------------------------

BOUNDS = ["empty_input", "huge_input", "trailing_newline", "timeout_zero", "timeout_huge"]


def test_cli_contract_out_of_bounds_exits_3_naming_file_line_field(tmp_path):
    """Every bounds contract in one run (a run reports every contract's problems), each problem said once."""
    paths = [HOSTILE / f"{name}.yaml" for name in BOUNDS]
    # the bundled matrix of installed frameworks
    proc = pytest_run(*[a for p in paths for a in ("--contract", str(p))], cwd=tmp_path, env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "collected" not in out
    for path in paths:
        expected = _expectations(path)
        assert expected, path
        for line, fld, fragment in expected:
            said = [s for s in out.splitlines() if s.startswith(f"{path}:{line}: {fld}: ") and fragment in s]
            assert len(said) == 1, (path, line, fld, out)


def test_input_element_limit_is_settable(monkeypatch):
    path = HOSTILE / "huge_input.yaml"
    with pytest.raises(ContractError) as info:
        load_checked(path, max_input_elements=2 ** 25)  # the input just over 16 Mi now fits; 8e9 does not
    assert [p[1] for p in info.value.problems] == ["cases[0].inputs.X.shape"]
    monkeypatch.setenv("CONFORMANCE_MAX_INPUT_ELEMENTS", "31")
    with pytest.raises(ContractError, match=r"cases\[1\].inputs.X.shape: 32 elements is more than the 31"):
        load_checked(bundled_contracts()["centered"])
    monkeypatch.setenv("CONFORMANCE_MAX_INPUT_ELEMENTS", "0")
    with pytest.raises(ValueError, match="positive whole number"):
        load_checked(bundled_contracts()["centered"])


def test_cli_max_input_elements(tmp_path):
    proc = pytest_run("--contract", "centered", "--max-input-elements", "31", cwd=tmp_path, env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "centered.yaml:14: cases[1].inputs.X.shape: 32 elements is more than the 31 allowed per input" in out


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "1e300"])
def test_cli_check_timeout_must_be_positive_and_finite(value, tmp_path):
    proc = pytest_run("--contract", "centered", f"--check-timeout={value}", cwd=tmp_path, env=ON_PATH, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert f"argument --check-timeout: '{value}': a timeout is a number of seconds above 0" in out, out
