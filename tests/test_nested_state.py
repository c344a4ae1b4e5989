"""Nested state: a slot held by a sublayer is named by its dotted path (``--state-map w1=w1.weight``, ``w1.kernel``
for NNX, and for Keras' ``w1/kernel``); where the layer's names do not tell the slot (two dense sublayers of one
shape), the hint names the unique candidate for each."""
import json

import pytest

from layer_conformance.checks.mistakes import state_map_hint
from layer_conformance.frameworks import installed
from tests.support import ROOT, pytest_run, user_package

LAYERS = '''
import torch
from torch import nn


class TwoLayer(nn.Module):
    """w2(relu(w1(x))), each an nn.Linear at its default init: its state is 'w1.weight' and 'w2.weight', of one
    shape, so neither the names nor the shapes tell which slot is which."""
    def __init__(self, d):
        super().__init__()
        self.w1, self.w2 = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))
'''

NNX_LAYERS = '''
import jax
from flax import nnx


class TwoLayer(nnx.Module):
    """The same in Flax NNX: its state is 'w1.kernel' and 'w2.kernel'."""
    def __init__(self, d, rngs):
        self.w1 = nnx.Linear(d, d, use_bias=False, rngs=rngs)
        self.w2 = nnx.Linear(d, d, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.w2(jax.nn.relu(self.w1(x)))
'''

KERAS_LAYERS = '''
import keras


class TwoLayer(keras.layers.Layer):
    """The same in Keras, its sublayers named as their attributes: its state is 'w1/kernel' and 'w2/kernel'."""
    def __init__(self, d, **kwargs):
        super().__init__(**kwargs)
        self.d = d
        self.w1 = keras.layers.Dense(d, use_bias=False, name="w1")
        self.w2 = keras.layers.Dense(d, use_bias=False, name="w2")

    def build(self, input_shape):
        self.w1.build(input_shape)
        self.w2.build(tuple(input_shape[:-1]) + (self.d,))

    def call(self, x):
        return self.w2(keras.ops.relu(self.w1(x)))

    def get_config(self):
        return {**super().get_config(), "d": self.d}
'''

# torch holds each weight [out, in] (y = x W^T), NNX each kernel [in, out] (y = x K): T is the one difference
REFERENCE = '''
import numpy as np

T = TRANSPOSE


def forward(x, w1, w2, d):
    w1, w2 = (w1.T, w2.T) if T else (w1, w2)
    return np.maximum(x @ w1, 0) @ w2


def vjp(cotangent, x, w1, w2, d):
    a1, a2 = (w1.T, w2.T) if T else (w1, w2)
    h = x @ a1
    dh = (cotangent @ a2.T) * (h > 0)
    g1, g2 = x.T @ dh, np.maximum(h, 0).T @ cotangent
    return {"x": dh @ a1.T, "w1": g1.T if T else g1, "w2": g2.T if T else g2}
'''

NAMES = {"torch": "weight", "jax": "kernel", "tensorflow": "kernel"}
LAYER_SOURCES = {"torch": LAYERS, "jax": NNX_LAYERS, "tensorflow": KERAS_LAYERS}

CONTRACT = '''name: mlp
kind: layer
constructor: {d: 16}
cases:
  - name: random
    inputs:
      x: {shape: [8, d], dtype: float32}
state:
  trainable:
    w1: {shape: [d, d], dtype: float32, init: random}
    w2: {shape: [d, d], dtype: float32, init: random}
reference: {module: mypkg.mlp}
'''


def test_the_hint_names_the_nested_variable_that_holds_the_slot():
    assert state_map_hint(["w1"], ["w1.weight", "w2.weight"]) == "use --state-map w1=w1.weight"
    assert state_map_hint(["w1"], ["w1/kernel", "w2/kernel"]) == "use --state-map w1=w1.kernel"  # Keras' path
    assert "w1=NAME" in state_map_hint(["w1", "w2"], ["w2.weight"])


def _run(tmp_path, framework, *extra):
    if not (tmp_path / "mypkg").exists():
        user_package(tmp_path, LAYER_SOURCES[framework])
        (tmp_path / "mypkg" / "mlp.py").write_text(REFERENCE.replace("TRANSPOSE", str(framework == "torch")))
        (tmp_path / "mlp.yaml").write_text(CONTRACT)
    out = tmp_path / f"results{len(extra)}.json"
    proc = pytest_run("-q", "--contract", "mlp.yaml", "--impl", "mypkg.layers:TwoLayer", "--framework", framework,
                      *extra,
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    return proc, {r["check"]: r for r in json.loads(out.read_text())["results"]}


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_sublayers_slots_by_dotted_path(tmp_path, framework):
    if not installed(framework):
        pytest.skip(f"{framework} is not installed")
    name = NAMES[framework]
    proc, records = _run(tmp_path, framework, "--check", "parameters", "--check", "values", "--check", "gradients")
    assert records["parameters"]["outcome"] == "failed", proc.stdout[-3000:]
    message = records["parameters"]["message"]
    assert f"--state-map w1=w1.{name}" in message and f"--state-map w2=w2.{name}" in message, message
    assert "SLOT=NAME" not in message, message

    extra = ("--check", "parameters", "--check", "values", "--check", "gradients") if framework != "torch" else ()
    proc, records = _run(tmp_path, framework, "--state-map", f"w1=w1.{name}", "--state-map", f"w2=w2.{name}", *extra)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {r["outcome"] for r in records.values()} <= {"passed", "skipped"}, proc.stdout[-3000:]
    assert records["values"]["outcome"] == records["gradients"]["outcome"] == "passed"
