"""Bounds on what a contract may ask of the judge (issue 29, point 9): the drawn inputs' elements per contract and
per run, the judge's memory while it validates a contract within a stated multiple of them, and the `timeout:`
ceiling. The public command line, in a subprocess, from a directory of the user's own."""
import textwrap
from pathlib import Path

from layer_conformance.contract import CONTRACT_ELEMENTS_PER_INPUT, DEFAULT_MAX_INPUT_ELEMENTS, JUDGE_MEMORY_MULTIPLE, MAX_TIMEOUT
from tests.support import pytest_run

HOSTILE = Path(__file__).resolve().parents[1] / "hostile_contracts"


def test_eight_float64_inputs_of_4096_squared_are_a_contract_error(tmp_path):
    path = HOSTILE / "eight_big_inputs.yaml"
    proc = pytest_run("-q", "-n", "0", "--contract", str(path), cwd=tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 3, said[-3000:]
    limit = CONTRACT_ELEMENTS_PER_INPUT * DEFAULT_MAX_INPUT_ELEMENTS
    assert f"{path}:6: cases: the contract's drawn inputs" in said, said[-3000:]
    assert f"total 134217728 elements, more than the {limit} allowed per contract" in said
    assert "--max-contract-elements" in said and "Traceback" not in said and "collected" not in said


# eight inputs, the reference a sum: every case draws them all at once, and the judge's self-check of the
# reference (forward, vjp, a finite difference per input) holds them and their copies
REFERENCE = textwrap.dedent("""\
    NAMES = "XABCDEFG"

    def forward(X, A, B, C, D, E, F, G, **_):
        return X + A + B + C + D + E + F + G

    def vjp(g, *inputs, **_):
        return {n: g.copy() for n in NAMES}
""")


def _contract(rows, cols, timeout=None):
    inputs = "\n".join(f"      {n}: {{shape: [{rows}, {cols}], dtype: float64}}" for n in "XABCDEFG")
    return (f"name: eight_inputs\nkind: function\ncases:\n  - name: all\n    inputs:\n{inputs}\n"
            f"reference: {{module: eightref}}\n" + (f"timeout: {timeout}\n" if timeout is not None else ""))


def test_the_run_total_is_bounded_too(tmp_path):
    (tmp_path / "eightref.py").write_text(REFERENCE)
    for name in ("one", "two"):
        (tmp_path / f"{name}.yaml").write_text(_contract(4, 8).replace("eight_inputs", name))
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text("- {contract: one.yaml, impl: 'eightref:forward', framework: numpy}\n"
                        "- {contract: two.yaml, impl: 'eightref:forward', framework: numpy}\n")
    proc = pytest_run("-q", "-n", "0", "--bindings", str(bindings), "--max-run-elements", "300", "--collect-only",
                      cwd=tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 3, said[-3000:]
    assert "two.yaml:3: cases: the contract's drawn inputs total 256 elements, and with the run's other " \
           "contracts' 256 that is more than the 300 allowed per run" in said, said[-3000:]


MEASURE = textwrap.dedent("""\
    import os

    def pytest_unconfigure(config):
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                with open(os.path.join(os.path.dirname(__file__), "peak_kib"), "w") as f:
                    f.write(line.split()[1])
""")


def _judge_peak(cwd, rows, cols, *limits) -> int:
    """The judge's peak resident memory, in bytes, through planning and validating the eight-input contract."""
    (cwd / "eight.yaml").write_text(_contract(rows, cols))
    (cwd / "bindings.yaml").write_text("- {contract: eight.yaml, impl: 'eightref:forward', framework: numpy}\n")
    proc = pytest_run("-q", "-n", "0", "--bindings", "bindings.yaml", "--collect-only", *limits, cwd=cwd)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return int((cwd / "peak_kib").read_text()) * 1024


def test_the_judge_memory_during_validation_stays_within_the_stated_multiple(tmp_path):
    (tmp_path / "eightref.py").write_text(REFERENCE)
    (tmp_path / "conftest.py").write_text(MEASURE)
    per_input = 1024 * 1024
    limits = ("--max-input-elements", str(per_input), "--max-contract-elements", str(8 * per_input))
    baseline = _judge_peak(tmp_path, 4, 8, *limits)
    worst = _judge_peak(tmp_path, 1024, 1024, *limits)   # the largest contract these limits allow: 8 Mi elements
    allowed = JUDGE_MEMORY_MULTIPLE * 8 * (8 * per_input)   # bytes, in float64
    assert worst - baseline <= allowed, (worst - baseline) / (8 * 8 * per_input)
    # one element more is refused, before anything is drawn
    (tmp_path / "eight.yaml").write_text(_contract(1024, 1024).replace("[1024, 1024]}", "[1024, 1024]}", 7)
                                         .replace("G: {shape: [1024, 1024]", "G: {shape: [1025, 1024]"))
    proc = pytest_run("-q", "-n", "0", "--bindings", "bindings.yaml", "--collect-only", "--max-input-elements",
                      str(2 * per_input), "--max-contract-elements", str(8 * per_input), cwd=tmp_path)
    assert proc.returncode == 3 and "allowed per contract" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def test_a_timeout_above_the_ceiling_is_refused(tmp_path):
    assert MAX_TIMEOUT == 900
    (tmp_path / "eightref.py").write_text(REFERENCE)
    (tmp_path / "slow.yaml").write_text(_contract(4, 8, timeout=901))
    proc = pytest_run("-q", "-n", "0", "--contract", "slow.yaml", "--impl", "eightref:forward", "--framework", "torch",
                      "--collect-only", cwd=tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 3, said[-3000:]
    assert "slow.yaml:15: timeout: 901 s is longer than the longest timeout, 900 s (15 minutes)" in said, said[-3000:]
    proc = pytest_run("-q", "-n", "0", "--contract", "slow.yaml", "--impl", "eightref:forward",
                      "--check-timeout", "901", cwd=tmp_path)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 4 and "at most 900 (15 minutes" in said, said[-3000:]
    (tmp_path / "ok.yaml").write_text(_contract(4, 8, timeout=900))
    proc = pytest_run("-q", "-n", "0", "--contract", "ok.yaml", "--impl", "eightref:forward", "--framework", "torch",
                      "--collect-only", cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
