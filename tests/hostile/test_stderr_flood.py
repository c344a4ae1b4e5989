"""Issue 29 §11: a layer that writes hundreds of megabytes to stderr must not flood the terminal or CI's log,
and a failing check keeps only the last 64 KiB of it. Run through the public command line, from a user's
directory."""
import json

import pytest

from tests.support import pytest_run

pytest.importorskip("torch")

LAYER = """\
import sys

import torch
from torch import nn


class Noisy(nn.Module):
    \"\"\"A correct RMSNorm, but for its gain (two, so `parameters` fails), that writes 64 MiB to stderr per call.\"\"\"
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.full((d,), 2.0))
        self.eps = eps

    def forward(self, x):
        chunk = "noise " * 1024 + "\\n"
        for _ in range(64 * 1024 * 1024 // len(chunk)):
            sys.stderr.write(chunk)
        sys.stderr.write("LAST LINE OF THE LAYER\\n")
        sys.stderr.flush()
        return self.gain * x * x.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
"""


def test_a_stderr_flood_stays_out_of_the_terminal_and_is_cut_to_its_tail(tmp_path):
    (tmp_path / "noisy.py").write_text(LAYER)
    proc = pytest_run("-q", "-n", "0", "--contract", "rmsnorm", "--impl", "noisy:Noisy", "--check", "values",
                      "--check", "parameters", "--dtype", "float32", "--conformance-json", "r.json", cwd=tmp_path,
                      timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert len(out) < 1_000_000 and "noise noise" not in out, len(out)   # the terminal never sees the flood
    records = {r["check"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    failed = records["parameters"]
    assert failed["outcome"] == "failed", failed
    tail = (failed.get("details") or {}).get("stderr_tail", "")
    assert 0 < len(tail.encode()) <= 64 << 10, len(tail)
    assert "LAST LINE OF THE LAYER" in tail   # its end, not its beginning
