"""``init: random``: a slot the layer draws itself (an nn.Linear's Kaiming start). ``parameters`` judges its shape,
dtype, finiteness, two builds with the same seed and the declared bounds instead of a fixed value; every value
comparison sets the layer's own initial values and hands the same to the reference."""
import json

import numpy as np
import pytest

from layer_conformance.contract import ContractError, load_contract
from layer_conformance.contract.sections import RandomInit
from layer_conformance.frameworks import installed
from tests.support import MXNET_PYTHON, ROOT, pytest_run, user_package

LAYERS = '''
import numpy as np
import torch
from torch import nn


class Dense(nn.Module):
    """y = x W^T, W an nn.Linear's at its default (Kaiming uniform) initialisation."""
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        return self.proj(x)


class Unseeded(Dense):
    """Its weight drawn from numpy's unseeded generator: two builds with the same seed differ."""
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        with torch.no_grad():
            self.proj.weight.copy_(torch.from_numpy(np.random.default_rng().uniform(-0.25, 0.25, (d_out, d_in))))


class TooWide(Dense):
    """Seeded, but from a standard normal: about seven times the declared std."""
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        nn.init.normal_(self.proj.weight)


class Projection(nn.Module):
    """A fixed random projection, a buffer drawn from torch's generator: y = x P^T."""
    def __init__(self, d_in, d_out):
        super().__init__()
        self.register_buffer("weight", torch.randn(d_out, d_in))

    def forward(self, x):
        return x @ self.weight.T


class UnseededProjection(Projection):
    """The same buffer from numpy's unseeded generator."""
    def __init__(self, d_in, d_out):
        super().__init__(d_in, d_out)
        self.weight.copy_(torch.from_numpy(np.random.default_rng().standard_normal((d_out, d_in))))


class IgnoresWeight(Dense):
    """Computes with a fixed matrix of its own: the values check, at the layer's own weight, catches it."""
    def forward(self, x):
        return x @ torch.full_like(self.proj.weight, 0.1).T
'''

NNX_LAYERS = '''
import jax.numpy as jnp
import numpy as np
from flax import nnx


class Dense(nnx.Module):
    """y = x K, K an nnx.Linear's at its default (LeCun normal) initialisation."""
    def __init__(self, d_in, d_out, rngs):
        self.proj = nnx.Linear(d_in, d_out, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.proj(x)


class Unseeded(Dense):
    """Its kernel drawn from numpy's unseeded generator: two builds with the same Rngs differ."""
    def __init__(self, d_in, d_out, rngs):
        super().__init__(d_in, d_out, rngs)
        drawn = np.random.default_rng().uniform(-0.25, 0.25, (d_in, d_out))
        self.proj.kernel.value = jnp.asarray(drawn, dtype=jnp.float32)
'''

KERAS_LAYERS = '''
import keras
import numpy as np


class Dense(keras.layers.Layer):
    """y = x K, K a keras Dense's at its default (Glorot uniform) initialisation."""
    def __init__(self, d_in, d_out, **kwargs):
        super().__init__(**kwargs)
        self.d_in, self.d_out = d_in, d_out
        self.proj = keras.layers.Dense(d_out, use_bias=False)

    def build(self, input_shape):
        self.proj.build(input_shape)

    def call(self, x):
        return self.proj(x)

    def get_config(self):
        return {**super().get_config(), "d_in": self.d_in, "d_out": self.d_out}


class Unseeded(Dense):
    """Its kernel drawn from numpy's unseeded generator: two builds with the same seed differ."""
    def build(self, input_shape):
        super().build(input_shape)
        drawn = np.random.default_rng().uniform(-0.25, 0.25, (self.d_in, self.d_out))
        self.proj.kernel.assign(drawn.astype("float32"))
'''

GLUON_LAYERS = '''
from layer_conformance.layerside.mxnet_shim import apply
apply()  # the README's shim, before importing mxnet
from mxnet import gluon


class Dense(gluon.HybridBlock):
    """y = x W^T, W a Gluon Dense's [out, in] at its default initialisation (uniform, scale 0.07)."""
    def __init__(self, d_in, d_out, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.proj = gluon.nn.Dense(d_out, in_units=d_in, use_bias=False)

    def hybrid_forward(self, F, x):
        return self.proj(x)
'''

OTHER_LAYERS = {"jax": NNX_LAYERS, "tensorflow": KERAS_LAYERS, "mxnet": GLUON_LAYERS}

# torch stores the weight [out, in] (y = x W^T), NNX the kernel [in, out] (y = x K)
REFERENCE = '''
def forward(x, weight, d_in, d_out):
    return x @ weight.T


def vjp(cotangent, x, weight, d_in, d_out):
    return {"x": cotangent @ weight, "weight": cotangent.T @ x}


def forward_kernel(x, weight, d_in, d_out):
    return x @ weight


def vjp_kernel(cotangent, x, weight, d_in, d_out):
    return {"x": cotangent @ weight.T, "weight": x.T @ cotangent}
'''

CONTRACT = '''name: dense
kind: layer
constructor: {d_in: 16, d_out: 16}
cases:
  - name: random
    inputs:
      x: {shape: [8, d_in], dtype: float32}
state:
  trainable:
    weight: {shape: [d_out, d_in], dtype: float32, init: INIT}
reference: {module: mypkg.ref REFERENCE}
'''


def _contract(tmp_path, init="{random: {mean: 0.0, std: 0.144}}", framework="torch"):
    path = tmp_path / f"dense_{framework}.yaml"
    functions = "" if framework in ("torch", "mxnet") else ", forward: forward_kernel, vjp: vjp_kernel"
    path.write_text(CONTRACT.replace("INIT", init).replace(" REFERENCE", functions))
    return path


# --- the contract's forms ------------------------------------------------------------------------------------------

def test_random_init_forms_load(tmp_path):
    bare = load_contract(_contract(tmp_path, "random")).trainable["weight"]
    assert bare.random == RandomInit() and bare.random.finite
    bounded = load_contract(_contract(tmp_path)).trainable["weight"]
    assert bounded.random == RandomInit(mean=0.0, std=0.144)
    assert load_contract(_contract(tmp_path, "ones")).trainable["weight"].random is None


@pytest.mark.parametrize("init,fld,fragment", [
    ("{random: {std: 0.0}}", "state.trainable.weight.init.random.std", "less than or equal to the minimum of 0"),
    ("{random: {spread: 1.0}}", "state.trainable.weight.init.random.spread", "unknown key 'spread'"),
    ("{random: {mean: .inf}}", "state.trainable.weight.init.random.mean", "is not a finite number"),
    ("randomly", "state.trainable.weight.init", "random or {random: {mean: m, std: s, finite: true}}"),
])
def test_a_bad_random_init_is_a_contract_error_at_its_field(tmp_path, init, fld, fragment):
    path = _contract(tmp_path, init)
    with pytest.raises(ContractError) as info:
        load_contract(path)
    assert f"{path}:10: {fld}: " in str(info.value) and fragment in str(info.value), str(info.value)


def test_a_random_test_value_is_not_a_value_rule(tmp_path):
    path = tmp_path / "dense.yaml"
    path.write_text(CONTRACT.replace("init: INIT", "init: random, test_value: random"))
    with pytest.raises(ContractError, match="test_value: 'random' is not a value rule"):
        load_contract(path)


# --- a user's layer, through the command line ------------------------------------------------------------------------

def _run(tmp_path, impl, *extra, framework="torch", kind="trainable", std=None):
    if not (tmp_path / "mypkg").exists():
        user_package(tmp_path, LAYERS if framework == "torch" else OTHER_LAYERS[framework])
        (tmp_path / "mypkg" / "ref.py").write_text(REFERENCE)
    out = tmp_path / f"{impl}.json"
    # nn.Linear(16, 16) draws U(-1/4, 1/4), std 1/sqrt(48); nnx.Linear a LeCun normal and keras' Dense a Glorot
    # uniform (U(-sqrt(6/32), sqrt(6/32))), both of std 1/4
    init = "{random: {mean: 0.0, std: %s}}" % (std or ("0.144" if framework == "torch" else "0.25"))
    contract = _contract(tmp_path, init, framework)
    contract.write_text(contract.read_text().replace("  trainable:", f"  {kind}:"))
    proc = pytest_run("-q", "--contract", str(contract), "--impl", f"mypkg.layers:{impl}",
                      "--framework", framework, *extra, *(("--executor-python", f"mxnet={MXNET_PYTHON}")
                                                           if framework == "mxnet" else ()),
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    records = json.loads(out.read_text())["results"]
    return proc, {r["check"]: r for r in records}


def _failed(records) -> set:
    return {c for c, r in records.items() if r["outcome"] == "failed"}


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_an_nn_linear_at_its_default_init_passes_every_check(tmp_path):
    proc, records = _run(tmp_path, "Dense")
    assert proc.returncode == 0 and not _failed(records), proc.stdout[-3000:]
    assert records["parameters"]["outcome"] == "passed" and records["values"]["outcome"] == "passed"


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_two_builds_that_differ_under_one_seed_fail_parameters_naming_the_slot(tmp_path):
    proc, records = _run(tmp_path, "Unseeded", "--check", "parameters", "--check", "values")
    assert _failed(records) == {"parameters"}, proc.stdout[-3000:]
    message = records["parameters"]["message"]
    assert "slot 'weight' (init: random) differs between two builds with the same seed" in message, message
    assert "unseeded numpy" in message, message


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_values_outside_the_declared_bounds_fail_parameters_naming_the_bound(tmp_path):
    proc, records = _run(tmp_path, "TooWide", "--check", "parameters", "--check", "values")
    assert _failed(records) == {"parameters"}, proc.stdout[-3000:]
    message = records["parameters"]["message"]
    assert "slot 'weight' has standard deviation" in message and "init: random: std 0.144" in message, message


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_a_layer_that_ignores_its_random_weight_fails_values(tmp_path):
    proc, records = _run(tmp_path, "IgnoresWeight", "--check", "parameters", "--check", "values")
    assert _failed(records) == {"values"}, proc.stdout[-3000:]


def test_the_bounds_judge_by_the_number_of_elements():
    from layer_conformance.checks.state import _random_problems
    from layer_conformance.contract.sections import Slot
    spec = Slot.of({"shape": [256], "dtype": "float32", "init": {"random": {"mean": 0.0, "std": 0.1}}})
    rng = np.random.default_rng(0)
    assert _random_problems("w", spec, 0.1 * rng.standard_normal(256), None) == []
    assert any("mean" in p for p in _random_problems("w", spec, 0.5 + 0.1 * rng.standard_normal(256), None))
    assert any("standard deviation" in p for p in _random_problems("w", spec, rng.standard_normal(256), None))
    bad = np.array([np.nan] + [0.0] * 255)
    assert "non-finite" in _random_problems("w", spec, bad, None)[0]
    loose = Slot.of({"shape": [256], "dtype": "float32", "init": {"random": {"finite": False}}})
    assert _random_problems("w", loose, bad, bad) == []
    # a second build without the slot does not repeat the first either
    from layer_conformance.checks.state import NOT_FOUND
    missing = _random_problems("w", spec, 0.1 * rng.standard_normal(256), NOT_FOUND)
    assert len(missing) == 1 and "not found in a second build" in missing[0]


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_a_random_buffer_is_judged_by_buffers(tmp_path):
    checks = ("--check", "parameters", "--check", "buffers", "--check", "values")
    proc, records = _run(tmp_path, "Projection", *checks, kind="non_trainable", std="1.0")
    assert not _failed(records) and records["buffers"]["outcome"] == "passed", proc.stdout[-3000:]
    assert records["values"]["outcome"] == "passed", proc.stdout[-3000:]
    proc, records = _run(tmp_path, "UnseededProjection", *checks, kind="non_trainable", std="1.0")
    assert _failed(records) == {"buffers"}, proc.stdout[-3000:]
    assert "slot 'weight' (init: random) differs between two builds" in records["buffers"]["message"]


@pytest.mark.parametrize("framework", ["jax", "tensorflow"])
def test_an_nnx_or_keras_dense_at_its_default_init_passes_and_an_unseeded_one_fails(tmp_path, framework):
    if not installed(framework):
        pytest.skip(f"{framework} is not installed")
    proc, records = _run(tmp_path, "Dense", "--check", "parameters", "--check", "values", "--check", "gradients",
                         framework=framework)
    assert not _failed(records) and records["values"]["outcome"] == "passed", proc.stdout[-3000:]
    proc, records = _run(tmp_path, "Unseeded", "--check", "parameters", "--check", "values", framework=framework)
    assert _failed(records) == {"parameters"}, proc.stdout[-3000:]
    assert "slot 'weight' (init: random) differs between two builds" in records["parameters"]["message"]


@pytest.mark.skipif(not MXNET_PYTHON.exists(), reason="no .venv-mxnet here")
def test_a_gluon_dense_at_its_default_init_passes(tmp_path):
    # Gluon's Dense draws U(-0.07, 0.07): std 0.07/sqrt(3)
    proc, records = _run(tmp_path, "Dense", "--check", "parameters", "--check", "values", "--check", "gradients",
                         framework="mxnet", std="0.0404")
    assert not _failed(records) and records["parameters"]["outcome"] == "passed", proc.stdout[-3000:]
    assert records["values"]["outcome"] == records["gradients"]["outcome"] == "passed", proc.stdout[-3000:]
