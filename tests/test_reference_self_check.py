"""The contract's reference is checked against itself before any layer is judged: a reference whose vjp
disagrees with finite differences of its own forward, a surrogate gradient of the wrong shape, or a reference
that breaks a property its contract declares is a contract error (exit 3, file:line, every problem at once),
never a layer's failure. Each run goes through the public command line, in a user's project directory."""
import importlib.util
import re
import textwrap

import pytest

from layer_conformance.contract import find_contract
from tests.support import USER_LAYER, pytest_run, user_package

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

# the user's RMSNorm, and a straight-through sign
LAYERS = USER_LAYER + textwrap.dedent("""
    class _Sign(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.sign(x)

        @staticmethod
        def backward(ctx, g):
            return g

    def sign_ste(x):
        return _Sign.apply(x)
""")

# the user's copy of the bundled RMSNorm reference, and the same with the 1/d of the mean forgotten in its vjp
REFERENCE = (find_contract("rmsnorm").parent.parent / "reference_impls" / "numpy" / "rmsnorm.py").read_text()
FORGOT = "    dX = gg * r - X * r ** 3 * (gg * X).sum(-1, keepdims=True) / d\n"
assert FORGOT in REFERENCE


@pytest.fixture
def project(tmp_path):
    return user_package(tmp_path, LAYERS)


def _contract(project, bundled: str, module: str) -> str:
    """A copy of a bundled contract in the project whose reference is the project's module ``module``."""
    text, n = re.subn(r"^reference: \{module: [\w.]+\}$", f"reference: {{module: {module}}}",
                      find_contract(bundled).read_text(), flags=re.M)
    assert n == 1
    (project / "mine.yaml").write_text(text)
    return f"mine.yaml:{text.splitlines().index(f'reference: {{module: {module}}}') + 1}"


def _run(project, impl, *args):
    proc = pytest_run("-q", "--impl", impl, "--framework", "torch", "--contract", "mine.yaml", *args, cwd=project)
    return proc, proc.stdout + proc.stderr


def test_a_reference_vjp_that_forgot_a_factor_is_a_contract_error_naming_case_input_and_gap(project):
    (project / "myref.py").write_text(REFERENCE.replace(FORGOT, FORGOT.replace(" / d\n", "\n")))
    where = _contract(project, "rmsnorm", "myref")
    proc, out = _run(project, "mypkg.layers:RMSNorm", "--check", "gradients")
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "gradients FAILED" not in out and "passed" not in out
    assert "invalid contract (3 problems)" in out, out
    for case in ("random", "edge_rows", "batch3d"):  # every case at once, the slot 'gain' (right) in none
        line = next((l for l in out.splitlines() if f"{where}: reference.vjp: case '{case}': " in l), None)
        assert line is not None, out
        assert "the gradient for input 'X' disagrees with finite differences of forward (float64)" in line, line
        m = re.search(r"vjp gives (\S+), the central difference (\S+): off by (\S+) \((\S+)%\)", line)
        assert m and float(m.group(3)) > 0.01 * max(abs(float(m.group(1))), abs(float(m.group(2)))), line
        assert re.search(r"worst element X\[[\d, ]+\]: vjp \S+, central difference \S+", line), line
    assert "'gain'" not in out, out


def test_the_same_contract_with_a_correct_reference_runs_and_the_layer_passes(project):
    (project / "myref.py").write_text(REFERENCE)
    _contract(project, "rmsnorm", "myref")
    proc, out = _run(project, "mypkg.layers:RMSNorm", "--check", "gradients", "--dtype", "float32")
    assert proc.returncode == 0, out[-3000:]
    assert "1 passed" in out, out[-3000:]


def test_a_surrogate_gradient_is_exempt_from_finite_differences_but_not_from_its_shape(project):
    # sign's true derivative is zero: the identity surrogate would fail a finite difference, and must not
    (project / "ste.py").write_text("import numpy as np\n\ndef forward(x, **_):\n    return np.sign(x)\n\n"
                                    "def vjp(g, x, **_):\n    return {'x': g}\n")
    _contract(project, "sign_ste", "ste")
    proc, out = _run(project, "mypkg.layers:sign_ste", "--collect-only")  # the contract loads: checked, no error
    assert proc.returncode == 0, out[-3000:]
    assert "mine.yaml::sign_ste[sign_ste-torch-cpu]::gradients" in out, out[-3000:]

    (project / "ste.py").write_text("import numpy as np\n\ndef forward(x, **_):\n    return np.sign(x)\n\n"
                                    "def vjp(g, x, **_):\n    return {'x': g.sum(-1)}\n")
    where = _contract(project, "sign_ste", "ste")
    proc, out = _run(project, "mypkg.layers:sign_ste", "--check", "gradients")
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "passed" not in out
    assert (f"{where}: reference.vjp: case 'worked': the reference vjp's gradient for 'x' has shape [], "
            f"expected [5]") in out, out
    assert (f"{where}: reference.vjp: case 'random': the reference vjp's gradient for 'x' has shape [4], "
            f"expected [4, 6]") in out, out

    (project / "ste.py").write_text("import numpy as np\n\ndef forward(x, **_):\n    return np.sign(x)\n\n"
                                    "def vjp(g, x, **_):\n    return {'x': g.astype(np.float32)}\n")
    proc, out = _run(project, "mypkg.layers:sign_ste", "--check", "gradients")
    assert proc.returncode == 3, out
    assert f"{where}: reference.vjp: case 'worked': the reference vjp's gradient for 'x' is float32" in out, out


def test_every_bundled_reference_passes_its_self_check():
    """Every bundled contract is loaded, its reference self-checked, when the bundled matrix is collected."""
    proc = pytest_run("--collect-only", "-q")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    collected = {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}
    bundled = find_contract("rmsnorm").parent
    assert {f"{bundled.name}/{p.name}" for p in bundled.glob("*.yaml")} <= collected, out[-3000:]
