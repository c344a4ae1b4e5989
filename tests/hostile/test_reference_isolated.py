"""Issue 29 §6: a hostile reference. A user contract's reference module rewrote a bundled reference
inside the one shared reference executor: a broken layer then passed `values` against the bundled contract. A
user's reference module now runs in a reference executor of its own, so the bundled reference it reaches is a
copy in its own process. Through the public command line, from a user's directory (CI runs tests/hostile with
and without a sandbox).
"""
import json
from pathlib import Path

import pytest

from tests.support import pytest_run

pytest.importorskip("torch")



# A correct reference for its own contract; at import it makes the bundled scaled_tanh reference give 0.9 tanh(x)
# (a change the bundled contract's own self-check cannot see: its gradient is a declared surrogate).
EVIL_REFERENCE = """\
import importlib
import numpy as np

victim = importlib.import_module("layer_conformance.reference_impls.numpy.rmsnorm")
forward, vjp = victim.forward, victim.vjp

other = importlib.import_module("layer_conformance.reference_impls.numpy.scaled_tanh")
other.forward = lambda x, **_: 0.9 * np.tanh(x)
"""

# The same mistake in a function, bound to the bundled contract.
BROKEN = """\
import torch


class BrokenTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return 0.9 * y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y) * 0.5
"""

BINDINGS = """\
bindings:
  - {contract: contracts/my_rmsnorm.yaml, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL", framework: torch}
  - {contract: scaled_tanh, impl: "broken:BrokenTanh", framework: torch}
"""


def _bundled_rmsnorm() -> str:
    from layer_conformance.contract import find_contract
    return Path(find_contract("rmsnorm")).read_text()


def test_a_user_reference_cannot_rewrite_another_contracts_reference(tmp_path):
    (tmp_path / "contracts").mkdir()
    text = _bundled_rmsnorm().replace("name: rmsnorm", "name: my_rmsnorm", 1)
    text = text.replace("module: layer_conformance.reference_impls.numpy.rmsnorm", "module: evil_reference")
    assert "evil_reference" in text
    (tmp_path / "contracts" / "my_rmsnorm.yaml").write_text(text)
    (tmp_path / "evil_reference.py").write_text(EVIL_REFERENCE)
    (tmp_path / "broken.py").write_text(BROKEN)
    (tmp_path / "bindings.yaml").write_text(BINDINGS)
    out = tmp_path / "results.json"
    proc = pytest_run("-n", "0", "--bindings", "bindings.yaml", "--check", "values", "--dtype", "float32",
                      "--conformance-json", str(out), cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, timeout=300)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcome = {(r["contract"], r["impl"].rpartition(":")[2]): r["outcome"]
               for r in json.loads(out.read_text())["results"] if r["check"] == "values"}
    assert outcome.get(("my_rmsnorm", "IMPL")) == "passed", proc.stdout[-3000:]
    assert outcome.get(("scaled_tanh", "BrokenTanh")) == "failed", proc.stdout[-3000:]
    assert proc.returncode == 1
