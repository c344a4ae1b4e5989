"""A binding that does not fit its layer is the user's to fix (exit 4, both sides named), never a layer
failure; --arg-map (and `arg_map` in a bindings file) maps the contract's arguments onto the layer's."""
import json
from pathlib import Path

import pytest

from tests.support import pytest_run, torch_rmsnorm

pytest.importorskip("torch")

ROOT = str(Path(__file__).resolve().parent.parent)

# the README's RMSNorm with a constructor argument of its own name (dim)
LAYER = torch_rmsnorm(d="dim")


def run(tmp_path, *args):
    (tmp_path / "mylayer.py").write_text(LAYER)
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "--check", "values", "--check", "parameters", "--dtype", "float32",
                      f"--conformance-json={out}", *args, cwd=tmp_path, timeout=300)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, records


def test_constructor_that_cannot_take_the_contract_arguments_is_a_usage_error(tmp_path):
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 4, said[-2000:]
    assert "requires 'dim', which the contract does not give (the contract gives 'd', 'eps')" in said
    assert "--arg-map d=dim" in said
    assert records == []  # said before any check runs: never blamed on the layer


def test_arg_map_on_the_command_line(tmp_path):
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--arg-map", "d=dim")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert [r["outcome"] for r in records] == ["passed", "passed"]


def test_arg_map_in_a_bindings_file(tmp_path):
    (tmp_path / "bindings.yaml").write_text('- {contract: rmsnorm, impl: "mylayer:RMSNorm", arg_map: ["d=dim"]}\n')
    proc, records = run(tmp_path, "--bindings", "bindings.yaml")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert [r["outcome"] for r in records] == ["passed", "passed"]
