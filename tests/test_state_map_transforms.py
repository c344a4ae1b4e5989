"""A state map's chain of transforms (``--state-map w=lin.weight|T``, ``|permute(1,0,2)``, ``|reshape(8,2,4)``):
the chain maps the layer's variable to the contract slot's layout, its inverse writes a slot's value into the
variable. torch's nn.Linear holds its weight [out, in], a slot of [in, out] is it transposed; a bad chain is a
usage error (exit 4), never the layer's failure."""
import json

import numpy as np
import pytest

from layer_conformance import state_map
from layer_conformance.checks.mistakes import state_map_hint
from layer_conformance.frameworks import installed
from tests.support import ROOT, pytest_run, user_package

TORCH_LAYER = '''
import torch
from torch import nn


class Proj(nn.Module):
    """y = x W^T through an nn.Linear: its weight is [out, in]."""
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=False)

    def forward(self, x):
        return self.lin(x)
'''

NNX_LAYER = '''
import jax.numpy as jnp
from flax import nnx


class Heads(nnx.Module):
    """y[b, h, k] = sum_i x[b, i] kernel[i, h*k]: the kernel [d_in, heads*k] of one nnx.Linear."""
    def __init__(self, d_in, heads, k, rngs):
        self.heads, self.k = heads, k
        self.proj = nnx.Linear(d_in, heads * k, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.proj(x).reshape(x.shape[0], self.heads, self.k)
'''

KERAS_LAYER = '''
import keras


class Heads(keras.layers.Layer):
    """The same in Keras: the kernel 'proj/kernel' [d_in, heads*k] of a Dense named proj."""
    def __init__(self, d_in, heads, k, **kwargs):
        super().__init__(**kwargs)
        self.d_in, self.heads, self.k = d_in, heads, k
        self.proj = keras.layers.Dense(heads * k, use_bias=False, name="proj")

    def build(self, input_shape):
        self.proj.build(input_shape)

    def call(self, x):
        return keras.ops.reshape(self.proj(x), (-1, self.heads, self.k))

    def get_config(self):
        return {**super().get_config(), "d_in": self.d_in, "heads": self.heads, "k": self.k}
'''

# the contract's slot is [in, out] (y = x w): torch's weight transposed
MATMUL = '''
import numpy as np


def forward(x, w, **_):
    return np.einsum("bi,i...->b...", x, w)


def vjp(cotangent, x, w, **_):
    g = cotangent.reshape(cotangent.shape[0], -1)
    flat = w.reshape(w.shape[0], -1)
    return {"x": g @ flat.T, "w": (x.T @ g).reshape(w.shape)}
'''

PROJ_CONTRACT = '''name: proj
kind: layer
constructor: {d_in: 6, d_out: 4}
cases:
  - name: random
    inputs:
      x: {shape: [5, d_in], dtype: float32}
state:
  trainable:
    w: {shape: [d_in, d_out], dtype: float32, init: random}
reference: {module: mypkg.matmul}
native:   # the contract's own state map takes the same chain
  torch: {class: torch.nn.Linear, args: {in_features: $d_in, out_features: $d_out, bias: false}, state: {w: "weight|T"}}
'''

# the slot [d_in, heads, k] is the kernel [d_in, heads*k] reshaped
HEADS_CONTRACT = '''name: heads
kind: layer
constructor: {d_in: 6, heads: 2, k: 3}
cases:
  - name: random
    inputs:
      x: {shape: [5, d_in], dtype: float32}
state:
  trainable:
    w: {shape: [d_in, heads, k], dtype: float32, init: random}
reference: {module: mypkg.matmul}
'''

CHECKS = ("--check", "parameters", "--check", "values", "--check", "gradients")


def test_a_chain_maps_the_variable_to_the_slot_and_back():
    path, steps = state_map.parse("x|reshape(4,2,8)|permute(1,0,2)")
    assert path == "x" and state_map.chain_text(steps) == "|reshape(4,2,8)|permute(1,0,2)"
    assert state_map.shapes(steps, (8, 8))[-1] == (2, 4, 8)
    v = np.arange(64.0).reshape(8, 8)
    slot = state_map.to_slot(steps, v)
    assert np.array_equal(slot, v.reshape(4, 2, 8).transpose(1, 0, 2))
    assert np.array_equal(state_map.to_variable(steps, slot, (8, 8)), v)
    _, t = state_map.parse("lin.weight|T")
    assert np.array_equal(state_map.to_slot(t, v[:, :3]), v[:, :3].T)
    assert state_map.split_items("a=x, b=y|permute(1,0,2) c=z|T") == ["a=x", "b=y|permute(1,0,2)", "c=z|T"]


@pytest.mark.parametrize("entry, said", [("x|flip", "unknown transform 'flip'"), ("x|T(1)", "T takes no arguments"),
                                         ("x|permute(1,1)", "not a permutation"), ("x|reshape", "needs its")])
def test_a_chain_that_cannot_be_read_is_refused_with_its_reason(entry, said):
    with pytest.raises(state_map.StateMapError, match=said):
        state_map.parse(entry)


def test_the_hint_proposes_T_where_only_the_reversed_shape_matches():
    assert state_map_hint(["w"], {"lin.weight": (4, 6)}, {"w": (6, 4)}) == "use --state-map w=lin.weight|T"
    # a variable of the slot's own shape: no transpose proposed
    assert "|T" not in state_map_hint(["w"], {"lin.weight": (4, 6), "v": (6, 4)}, {"w": (6, 4)})


def _run(tmp_path, layers, contract, impl, framework, *extra):
    if not (tmp_path / "mypkg").exists():
        user_package(tmp_path, layers)
        (tmp_path / "mypkg" / "matmul.py").write_text(MATMUL)
        (tmp_path / "c.yaml").write_text(contract)
    out = tmp_path / f"results{len(list((tmp_path).glob('results*.json')))}.json"
    proc = pytest_run("-q", "--contract", "c.yaml", "--impl", impl, "--framework", framework, *extra,
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    records = {r["check"]: r for r in json.loads(out.read_text())["results"]} if out.exists() else {}
    return proc, records


def test_torch_linear_weight_bound_transposed(tmp_path):
    if not installed("torch"):
        pytest.skip("torch is not installed")
    run = lambda *extra: _run(tmp_path, TORCH_LAYER, PROJ_CONTRACT, "mypkg.layers:Proj", "torch", *CHECKS, *extra)
    proc, records = run("--state-map", "w=lin.weight|T", "--check", "native")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [records[c]["outcome"] for c in ("parameters", "values", "gradients", "native")] == ["passed"] * 4

    proc, records = run("--state-map", "w=lin.weight")   # without |T: the shape is the slot's reversed
    assert records["parameters"]["outcome"] == "failed", proc.stdout[-3000:]
    assert "--state-map w=lin.weight|T" in records["parameters"]["message"]

    proc, records = run()   # no map at all: neither the name nor the shape tells, the hint proposes |T
    assert records["parameters"]["outcome"] == "failed", proc.stdout[-3000:]
    assert "--state-map w=lin.weight|T" in records["parameters"]["message"]


def test_a_chain_that_does_not_fit_is_a_usage_error(tmp_path):
    if not installed("torch"):
        pytest.skip("torch is not installed")
    proc, records = _run(tmp_path, TORCH_LAYER, PROJ_CONTRACT, "mypkg.layers:Proj", "torch", "--check", "values",
                         "--state-map", "w=lin.weight|reshape(5,5)")
    assert proc.returncode == 4, proc.stdout[-3000:]
    assert records["values"]["outcome"] == "error" and records["values"]["usage_error"], records
    assert "reshape(5,5) does not fit shape [4, 6]" in records["values"]["message"]
    proc, _ = _run(tmp_path, TORCH_LAYER, PROJ_CONTRACT, "mypkg.layers:Proj", "torch", "--check", "values",
                   "--state-map", "w=lin.weight|flip")
    assert proc.returncode == 4 and "unknown transform 'flip'" in proc.stderr + proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("framework, layers, entry", [("jax", NNX_LAYER, "w=proj.kernel|reshape(6,2,3)"),
                                                      ("tensorflow", KERAS_LAYER, "w=proj.kernel|reshape(6,2,-1)")])
def test_a_kernel_reshaped_into_the_slot(tmp_path, framework, layers, entry):
    if not installed(framework):
        pytest.skip(f"{framework} is not installed")
    proc, records = _run(tmp_path, layers, HEADS_CONTRACT, "mypkg.layers:Heads", framework, *CHECKS,
                         "--state-map", entry)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [records[c]["outcome"] for c in ("parameters", "values", "gradients")] == ["passed"] * 3
