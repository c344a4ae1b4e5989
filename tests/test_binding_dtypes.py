"""A binding may narrow a contract's dtypes to those its layer is meant for (a layer that computes in
float32 whatever its input is not a float64 layer); naming a dtype the contract lacks is a usage error."""
from __future__ import annotations

from tests.support import ROOT, pytest_run


def _collect(tmp_path, dtypes):
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text(f'- {{contract: rmsnorm, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL", framework: torch, '
                        f'dtypes: {dtypes}}}\n')
    return pytest_run("-q", "--collect-only", f"--bindings={bindings}", cwd=ROOT, env={"PYTHONPATH": str(ROOT)},
                      timeout=300)


def test_a_binding_narrows_the_dtypes(tmp_path):
    proc = _collect(tmp_path, "[float32, bfloat16]")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    targets = {line.split("::")[1] for line in proc.stdout.splitlines() if "::" in line}
    assert targets == {"rmsnorm[IMPL-torch-cpu]", "rmsnorm[IMPL-torch-cpu-bfloat16]"}, targets


def test_a_dtype_the_contract_does_not_declare_is_a_usage_error(tmp_path):
    proc = _collect(tmp_path, "[float32, float8]")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "dtypes float8 are not among the contract's (float32, bfloat16, float16, float64)" in proc.stderr


def test_dtype_on_the_command_line_narrows_every_target(tmp_path):
    proc = pytest_run("-q", "--collect-only", "--contract", "centered", "--framework", "torch", "--dtype", "float16",
                      cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    targets = {line.split("::")[1] for line in proc.stdout.splitlines() if "::" in line}
    assert targets == {"centered[torch-cpu]", "centered[torch-cpu-float16]"}, targets
