"""``python -m layer_conformance new``, played as a new user in a directory of their own: the command drafts a
contract and a numpy reference stub from the layer; the stub, unfilled, stops the printed run with a contract error
that says what is left to write; filled (the only edit), the printed run passes a correct layer and fails a
mutant on its values."""
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import pytest

from layer_conformance.contract import load_contract
from layer_conformance.exitcodes import EXIT_CONTRACT, EXIT_FAILED, EXIT_USAGE
from layer_conformance.frameworks import installed
from tests.support import pytest_run, user_package

LAYERS = '''
import torch
from torch import nn


class SwiGLU(nn.Module):
    """w2(silu(w1(x)) * w3(x)), each an nn.Linear without bias at its default (random) init."""
    def __init__(self, d, h):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d, h, bias=False), nn.Linear(d, h, bias=False)
        self.w2 = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class SwiGLUGelu(SwiGLU):
    """The mutant: gelu where silu belongs."""
    def forward(self, x):
        return self.w2(nn.functional.gelu(self.w1(x)) * self.w3(x))
'''

# the numpy SwiGLU the user writes into the stub: the slots arrive as the layer holds them, torch's [out, in]
FILLED = '''
def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def forward(x, *, w1, w3, w2, **_):
    a = x @ w1.T
    return (a * _sigmoid(a) * (x @ w3.T)) @ w2.T


def vjp(g, x, *, w1, w3, w2, **_):
    a, b = x @ w1.T, x @ w3.T
    s = _sigmoid(a)
    gu = g @ w2
    ga, gb = gu * b * (s + a * s * (1 - s)), gu * a * s

    def rows(t):
        return t.reshape(-1, t.shape[-1])
    return {"x": ga @ w1 + gb @ w3, "w1": rows(ga).T @ rows(x), "w3": rows(gb).T @ rows(x),
            "w2": rows(g).T @ rows(a * s * b)}
'''


def new(cwd, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "layer_conformance", "new", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def printed_command(out: str) -> list:
    """The command ``new`` printed to run the contract, as this interpreter runs it."""
    line = out.split("run it with:\n", 1)[1].splitlines()[0]
    words = shlex.split(line)
    assert words[:3] == ["python", "-m", "pytest"], line
    return words[3:]


def fill(stub, body: str) -> None:
    """The user's one edit: the stub's functions replaced by their own (the module's docstring and imports kept)."""
    text = stub.read_text()
    stub.write_text(text[:text.index("\ndef forward")] + "\n" + textwrap.dedent(body))


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    """A user's directory after ``new`` for the torch SwiGLU: (directory, new's output)."""
    if not installed("torch"):   # the MXNet environment's run selects these tests by name
        pytest.skip("torch is not installed")
    root = user_package(tmp_path_factory.mktemp("user"), LAYERS)
    done = new(root, "--impl", "mypkg.layers:SwiGLU", "--input", "x: [4, 16]", "--arg", "d=16", "--arg", "h=32")
    assert done.returncode == 0, done.stdout + done.stderr
    return root, done.stdout


def test_new_drafts_a_contract_that_loads(drafted):
    root, out = drafted
    # the bundled contracts have a swiglu: the default name steps aside from it
    path, stub = root / "contracts" / "my_swiglu.yaml", root / "contracts" / "my_swiglu_reference.py"
    assert path.exists() and stub.exists(), out
    contract = load_contract(path)  # the harness's loader, without edits
    assert contract.constructor == {"d": 16, "h": 32}
    assert [c.name for c in contract.cases] == ["random", "scaled", "zeros"]
    assert set(contract.trainable) == {"w1", "w2", "w3"} and not contract.non_trainable
    assert all(spec.random is not None for spec in contract.trainable.values())  # nn.Linear's Kaiming start
    text = path.read_text()
    assert "w1: {shape: [h, d], dtype: float32, init: random}" in text and "w2: {shape: [d, h]" in text
    assert "reference: {module: contracts.my_swiglu_reference}" in text
    assert "dtypes: [float32, float64, bfloat16, float16]" in text
    assert 'wrt: [x, w1, w3, w2]' in text
    assert "w1.weight" in stub.read_text() and "[out_features, in_features]" in stub.read_text()
    words = printed_command(out)
    assert words[:6] == ["--contract", "contracts/my_swiglu.yaml", "--impl", "mypkg.layers:SwiGLU",
                         "--framework", "torch"]
    assert "--state-map" in words and "w1=w1.weight" in words


def test_stub_unfilled_says_what_is_left_to_write(drafted, tmp_path):
    root = shutil.copytree(drafted[0], tmp_path / "user")
    run = pytest_run(*printed_command(drafted[1]), cwd=root)
    out = run.stdout + run.stderr
    assert run.returncode == EXIT_CONTRACT, out
    assert "invalid contract" in out and "reference.forward" in out
    assert re.search(r"NotImplementedError: fill in: forward\(x, \.\.\.\), then vjp\(g, x, \.\.\.\), in "
                     r"contracts/my_swiglu_reference\.py", out), out
    # a contract error before any check: no layer is blamed
    assert "FAILED" not in out and "passed" not in out, out


def test_filled_stub_passes_the_layer_and_fails_the_mutant(drafted, tmp_path):
    root = shutil.copytree(drafted[0], tmp_path / "user")
    fill(root / "contracts" / "my_swiglu_reference.py", FILLED)
    words = printed_command(drafted[1])
    run = pytest_run(*words, cwd=root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed, 0 failed", run.stdout), run.stdout[-2000:]
    mutant = [w.replace("mypkg.layers:SwiGLU", "mypkg.layers:SwiGLUGelu") for w in words]
    run = pytest_run(*mutant, "--check", "values", cwd=root)
    assert run.returncode == EXIT_FAILED, run.stdout[-4000:]
    assert "my_swiglu[SwiGLUGelu-torch-cpu]::values failed: case 'random': mismatched elements" in run.stdout


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_a_required_argument_without_a_value_is_a_usage_error(tmp_path):
    root = user_package(tmp_path, LAYERS)
    done = new(root, "--impl", "mypkg.layers:SwiGLU", "--input", "x: [4, 16]", "--arg", "d=16")
    assert done.returncode == EXIT_USAGE
    assert "mypkg.layers:SwiGLU requires 'h' (no default): give it with --arg h=VALUE" in done.stderr
    assert not (root / "contracts").exists()


NNX_LAYERS = '''
import jax
from flax import nnx


class SwiGLU(nnx.Module):
    def __init__(self, d, rngs, h=32):
        self.w1 = nnx.Linear(d, h, use_bias=False, rngs=rngs)
        self.w3 = nnx.Linear(d, h, use_bias=False, rngs=rngs)
        self.w2 = nnx.Linear(h, d, use_bias=False, rngs=rngs)
        self.scale = nnx.Param(jax.numpy.ones((d,)))

    def __call__(self, x):
        return self.w2(jax.nn.silu(self.w1(x)) * self.w3(x)) * self.scale
'''


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed")
def test_new_reads_an_nnx_layer_without_importing_its_framework(tmp_path):
    """Flax NNX: kernels by dotted path (w1.kernel), a gain of ones, the constructor's default h; and the command's
    own process imports no framework (the layer runs in its executor only)."""
    root = user_package(tmp_path, NNX_LAYERS)
    code = ("import sys; from layer_conformance.cli import main; rc = main(sys.argv[1:]); "
            "assert not {'jax', 'flax', 'torch', 'tensorflow'} & set(sys.modules), sorted(sys.modules); "
            "sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "new", "--impl", "mypkg.layers:SwiGLU", "--input", "x: [4, 8]",
                           "--arg", "d=8", "-o", "checks/nnx_swiglu.yaml"], cwd=root, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    contract = load_contract(root / "checks" / "nnx_swiglu.yaml")
    assert contract.constructor == {"d": 8, "h": 32}
    text = (root / "checks" / "nnx_swiglu.yaml").read_text()
    assert "w1: {shape: [d, h], dtype: float32, init: random}   # the layer's w1.kernel" in text
    assert "scale: {shape: [d], dtype: float32, init: ones}" in text
    assert "Flax NNX holds a Linear's `kernel` as [in_features, out_features]" in \
        (root / "checks" / "nnx_swiglu_reference.py").read_text()
    words = printed_command(done.stdout)
    assert words[words.index("--framework") + 1] == "jax" and "w1=w1.kernel" in words


KERAS_LAYERS = '''
import keras


class GatedMLP(keras.layers.Layer):
    """The same SwiGLU in Keras, its Dense sublayers named as their attributes: 'w1/kernel'... each [in, out]."""
    def __init__(self, d, h=32, **kwargs):
        super().__init__(**kwargs)
        self.d, self.h = d, h
        self.w1 = keras.layers.Dense(h, use_bias=False, name="w1")
        self.w3 = keras.layers.Dense(h, use_bias=False, name="w3")
        self.w2 = keras.layers.Dense(d, use_bias=False, name="w2")

    def build(self, input_shape):
        self.w1.build(input_shape)
        self.w3.build(input_shape)
        self.w2.build(tuple(input_shape[:-1]) + (self.h,))

    def call(self, x):
        return self.w2(keras.ops.silu(self.w1(x)) * self.w3(x))

    def get_config(self):
        return {**super().get_config(), "d": self.d, "h": self.h}
'''

# the same numpy SwiGLU for kernels held [in, out] (x @ kernel), as the stub's docstring says Keras holds them
FILLED_KERNELS = '''
def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def forward(x, *, w1, w3, w2, **_):
    a = x @ w1
    return (a * _sigmoid(a) * (x @ w3)) @ w2


def vjp(g, x, *, w1, w3, w2, **_):
    a, b = x @ w1, x @ w3
    s = _sigmoid(a)
    gu = g @ w2.T
    ga, gb = gu * b * (s + a * s * (1 - s)), gu * a * s

    def rows(t):
        return t.reshape(-1, t.shape[-1])
    return {"x": ga @ w1.T + gb @ w3.T, "w1": rows(x).T @ rows(ga), "w3": rows(x).T @ rows(gb),
            "w2": rows(a * s * b).T @ rows(g)}
'''


@pytest.mark.skipif(not installed("tensorflow"), reason="tensorflow is not installed")
def test_a_keras_layer_from_new_to_green(tmp_path):
    """Keras: the framework detected, 'w1/kernel' mapped as w1=w1.kernel, the stub filled: the printed run passes."""
    root = user_package(tmp_path, KERAS_LAYERS)
    done = new(root, "--impl", "mypkg.layers:GatedMLP", "--input", "x: [4, 16]", "--arg", "d=16")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# the layer's w1/kernel" in (root / "contracts" / "gatedmlp.yaml").read_text()
    assert "Keras holds a Dense's `kernel` as [input_dim, units]" in \
        (root / "contracts" / "gatedmlp_reference.py").read_text()
    fill(root / "contracts" / "gatedmlp_reference.py", FILLED_KERNELS)
    words = printed_command(done.stdout)
    assert words[words.index("--framework") + 1] == "tensorflow" and "w1=w1.kernel" in words
    run = pytest_run(*words, cwd=root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed, 0 failed", run.stdout), run.stdout[-2000:]


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_reference_another_implementation_writes_no_stub(tmp_path):
    """--reference: the contract compares with another implementation (`reference: {impl, framework}`, its state
    map the layer's names), no stub is written; the printed command is green on the layer and red on a mutant."""
    root = user_package(tmp_path, LAYERS)
    done = new(root, "--impl", "mypkg.layers:SwiGLU", "--input", "x: [4, 16]", "--arg", "d=16", "--arg", "h=32",
               "--reference", "mypkg.layers:SwiGLU", "--name", "swiglu_vs")
    assert done.returncode == 0, done.stdout + done.stderr
    text = (root / "contracts" / "swiglu_vs.yaml").read_text()
    assert 'reference: {impl: "mypkg.layers:SwiGLU", framework: torch, state_map: ["w1=w1.weight"' in text, text
    assert not list((root / "contracts").glob("*.py"))
    words = printed_command(done.stdout)
    green = pytest_run(*words, cwd=root)
    assert green.returncode == 0, green.stdout[-4000:] + green.stderr[-2000:]
    mutant = [w.replace("mypkg.layers:SwiGLU", "mypkg.layers:SwiGLUGelu") for w in words]
    red = pytest_run(*mutant, "--check", "values", cwd=root)
    assert red.returncode == EXIT_FAILED, red.stdout[-4000:]
    assert "swiglu_vs[SwiGLUGelu-torch-cpu]::values failed: layer mypkg.layers:SwiGLUGelu (torch) vs reference" \
        in red.stdout, red.stdout[-4000:]