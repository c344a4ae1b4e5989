"""Issue 29 §13: ``native`` compared numbers only, so a layer returning float64 for float32 input passed it
(its float64 numbers round to the native torch.nn.RMSNorm's). ``native`` now compares dtypes, as ``values``
does, and says so in the same words. Run through the public command line, from a user's directory."""
import json
from pathlib import Path

import pytest
import yaml

from tests.support import pytest_run

pytest.importorskip("torch")

LAYER = """\
import torch
from torch import nn


class RMSNorm64(nn.Module):
    \"\"\"Computes in float64 "for accuracy" and returns that: right numbers, wrong dtype.\"\"\"
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        X64 = X.double()
        return self.gain.double() * X64 * X64.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
"""

# what values says of the same output, and what native now says too
PROMOTES = "dtype float64, expected float32 (the output is float64 for float32 inputs: the layer promotes it)"


def _run(cwd: Path, *args):
    (cwd / "mylayers.py").write_text(LAYER)
    proc = pytest_run("-q", "--assert=plain", "--impl", "mylayers:RMSNorm64", "--dtype", "float32",
                      "--conformance-json", "r.json", *args, cwd=cwd, timeout=300)
    out = proc.stdout + proc.stderr
    records = {r["check"]: r for r in json.loads((cwd / "r.json").read_text())["results"]} \
        if (cwd / "r.json").exists() else {}
    return proc, out, records


def test_native_alone_fails_a_layer_that_returns_float64_for_float32_input(tmp_path):
    """A contract that leaves ``values`` out (skipped): ``native`` is the only judge of the outputs, and it
    fails the layer in its own right, naming both dtypes and what the layer did."""
    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "specs" / "rmsnorm.yaml").read_text())
    spec["name"] = "rmsnorm_native_only"
    spec.setdefault("checks", {})["values"] = {"skip": "judged against the native layer only"}
    (tmp_path / "rmsnorm_native_only.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc, out, records = _run(tmp_path, "--contract", "rmsnorm_native_only.yaml", "--check", "native")
    assert proc.returncode == 1, out[-3000:]
    native = records["native"]
    assert native["outcome"] == "failed", native
    assert f"vs native torch.nn.RMSNorm: output: {PROMOTES}" in native["message"], native["message"]


def test_with_values_native_is_blocked_by_it_and_keeps_the_dtype_as_its_symptom(tmp_path):
    """With ``values`` run too, the one mistake is named once: ``values`` fails, ``native`` is blocked by
    it (never passed), and what native saw is the same dtype problem."""
    proc, out, records = _run(tmp_path, "--contract", "rmsnorm", "--check", "values", "--check", "native")
    assert proc.returncode == 1, out[-3000:]
    assert records["values"]["outcome"] == "failed" and PROMOTES in records["values"]["message"], records["values"]
    native = records["native"]
    assert native["outcome"] == "blocked" and native["blocked_by"] == "values", native
    assert PROMOTES in native["details"]["symptom"], native
