"""A contract's reference may be an implementation (issue 46 §1): ``reference: {impl: module:attr, framework: torch,
state_map: [...]}``, a trusted layer run as a layer is (in an executor of its own, in float64, its gradients from its
framework's autodiff), the layer's initial state copied into it through its own state map. A port across frameworks
is checked in one command: a Flax NNX or Keras layer against a PyTorch original (a transformers layer included)."""
import json

import pytest

from layer_conformance.contract import ContractError, load_contract
from layer_conformance.frameworks import installed
from tests.support import ROOT, pytest_run, user_package

TORCH_ORIGINAL = '''
import torch
from torch import nn


class MLP(nn.Module):
    """down(silu(up(x))), each an nn.Linear: weights [out, in]."""
    def __init__(self, d, h):
        super().__init__()
        self.up, self.down = nn.Linear(d, h, bias=False), nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down(nn.functional.silu(self.up(x)))


def llama_mlp(hidden_size, intermediate_size):
    """transformers' LlamaMLP: down(silu(gate(x)) * up(x))."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP
    return LlamaMLP(LlamaConfig(hidden_size=hidden_size, intermediate_size=intermediate_size, hidden_act="silu",
                                   num_attention_heads=2, num_key_value_heads=2))
'''

NNX_PORT = '''
import jax
from flax import nnx


class MLP(nnx.Module):
    """The port: nnx.Linear kernels [in, out]."""
    def __init__(self, d, h, rngs):
        self.up = nnx.Linear(d, h, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(h, d, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.silu(self.up(x)))


class TransposedMLP(MLP):
    """A wrong port: the up kernel used transposed (as if it were torch's [out, in])."""
    def __call__(self, x):
        return self.down(jax.nn.silu(x @ self.up.kernel[...].T))
'''

KERAS_PORT = '''
import keras


class LlamaMLP(keras.layers.Layer):
    """transformers' LlamaMLP in Keras: Dense kernels [in, out], named as the slots."""
    def __init__(self, hidden_size, intermediate_size, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.gate = keras.layers.Dense(intermediate_size, use_bias=False, name="gate")
        self.up = keras.layers.Dense(intermediate_size, use_bias=False, name="up")
        self.down = keras.layers.Dense(hidden_size, use_bias=False, name="down")

    def build(self, input_shape):
        self.gate.build(input_shape)
        self.up.build(input_shape)
        self.down.build(tuple(input_shape[:-1]) + (self.intermediate_size,))

    def call(self, x):
        return self.down(self.mix(x))

    def mix(self, x):
        return keras.ops.silu(self.gate(x)) * self.up(x)

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size}


class OffByOne(LlamaMLP):
    """A wrong port: up(x) + 1."""
    def mix(self, x):
        return keras.ops.silu(self.gate(x)) * (self.up(x) + 1)
'''

MLP_CONTRACT = '''name: mlp_port
kind: layer
constructor: {d: 8, h: 8}
cases:
  - name: random
    inputs:
      x: {shape: [5, d], dtype: float32}
state:
  trainable:
    up: {shape: [d, h], dtype: float32, init: random}
    down: {shape: [h, d], dtype: float32, init: random}
reference:
  impl: "mypkg.original:MLP"
  framework: torch
  state_map: ["up=up.weight|T", "down=down.weight|T"]
'''

LLAMA_CONTRACT = '''name: llama_mlp_port
kind: layer
constructor: {hidden_size: 8, intermediate_size: 16}
cases:
  - name: random
    inputs:
      x: {shape: [2, 3, hidden_size], dtype: float32}
state:
  trainable:
    gate: {shape: [hidden_size, intermediate_size], dtype: float32, init: random}
    up: {shape: [hidden_size, intermediate_size], dtype: float32, init: random}
    down: {shape: [intermediate_size, hidden_size], dtype: float32, init: random}
reference:
  impl: "mypkg.original:llama_mlp"
  framework: torch
  state_map: ["gate=gate_proj.weight|T", "up=up_proj.weight|T", "down=down_proj.weight|T"]
'''

CHECKS = ("--check", "parameters", "--check", "values", "--check", "gradients")


def _run(tmp_path, port, contract, impl, framework, *extra):
    if not (tmp_path / "mypkg").exists():
        user_package(tmp_path, port)
        (tmp_path / "mypkg" / "original.py").write_text(TORCH_ORIGINAL)
        (tmp_path / "port.yaml").write_text(contract)
    out = tmp_path / f"results{len(list(tmp_path.glob('results*.json')))}.json"
    proc = pytest_run("-q", "--contract", "port.yaml", "--impl", impl, "--framework", framework, *CHECKS, *extra,
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    records = {r["check"]: r for r in json.loads(out.read_text())["results"]} if out.exists() else {}
    return proc, records


def _needs(*frameworks):
    for fw in frameworks:
        if not installed(fw):
            pytest.skip(f"{fw} is not installed")


def test_the_loader_reads_an_impl_reference_and_refuses_what_needs_a_numpy_module(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(MLP_CONTRACT)
    contract = load_contract(ok)
    assert contract.reference.label == "mypkg.original:MLP (torch)" and contract.reference.module is None
    assert contract.reference.state_map == ("up=up.weight|T", "down=down.weight|T")
    broken = tmp_path / "broken.yaml"
    broken.write_text(MLP_CONTRACT.replace("init: random}\n    down", "init: reference}\n    down")
                      .replace('"down=down.weight|T"', '"nope=down.weight|T"').replace("up.weight|T", "up.weight|flip"))
    with pytest.raises(ContractError) as raised:
        load_contract(broken)
    text = str(raised.value)
    assert "init: reference needs a numpy reference module" in text, text
    assert "'nope' is not a state slot" in text and "unknown transform 'flip'" in text, text


def test_an_nnx_port_passes_against_its_torch_original(tmp_path):
    _needs("torch", "jax")
    maps = ("--state-map", "up=up.kernel", "--state-map", "down=down.kernel")
    proc, records = _run(tmp_path, NNX_PORT, MLP_CONTRACT, "mypkg.layers:MLP", "jax", *maps)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [records[c]["outcome"] for c in ("parameters", "values", "gradients")] == ["passed"] * 3, records

    # the wrong port fails values, and the message names both implementations and the case
    proc, records = _run(tmp_path, NNX_PORT, MLP_CONTRACT, "mypkg.layers:TransposedMLP", "jax", *maps)
    assert records["values"]["outcome"] == "failed", proc.stdout[-3000:]
    message = records["values"]["message"]
    assert "layer mypkg.layers:TransposedMLP (jax) vs reference mypkg.original:MLP (torch)" in message, message
    assert "case 'random'" in message, message


def test_a_keras_port_of_a_transformers_layer(tmp_path):
    _needs("torch", "tensorflow")
    pytest.importorskip("transformers")
    maps = ("--state-map", "gate=gate.kernel", "--state-map", "up=up.kernel", "--state-map", "down=down.kernel")
    proc, records = _run(tmp_path, KERAS_PORT, LLAMA_CONTRACT, "mypkg.layers:LlamaMLP", "tensorflow", *maps)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [records[c]["outcome"] for c in ("parameters", "values", "gradients")] == ["passed"] * 3, records

    proc, records = _run(tmp_path, KERAS_PORT, LLAMA_CONTRACT, "mypkg.layers:OffByOne", "tensorflow", *maps)
    assert records["values"]["outcome"] == "failed", proc.stdout[-3000:]
    assert "vs reference mypkg.original:llama_mlp (torch)" in records["values"]["message"]


def test_a_reference_that_cannot_be_imported_is_a_contract_error(tmp_path):
    _needs("torch", "jax")
    contract = MLP_CONTRACT.replace("mypkg.original:MLP", "mypkg.original:Missing")
    proc, records = _run(tmp_path, NNX_PORT, contract, "mypkg.layers:MLP", "jax")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "reference.impl" in proc.stdout + proc.stderr and "Missing" in proc.stdout + proc.stderr
    assert not records


def test_a_reference_in_another_environment_runs_in_one_command(tmp_path):
    """A torch layer against the Gluon LayerNorm, whose framework lives in its own environment (--executor-python):
    loaded and run there, in one command; green on the correct layer, red on a mutant, naming both sides."""
    from tests.support import MXNET_PYTHON
    _needs("torch")
    if not MXNET_PYTHON.exists():
        pytest.skip("no .venv-mxnet here")
    text = (ROOT / "specs" / "layernorm.yaml").read_text().replace("name: layernorm", "name: layernorm_vs_gluon", 1)
    lines = [("reference: {impl: \"layer_conformance.reference_impls.mxnet.layernorm:LayerNorm\", framework: mxnet}"
              if line.startswith("reference:") else line) for line in text.splitlines()]
    (tmp_path / "ln.yaml").write_text("\n".join(lines) + "\n")
    run = ("--contract", "ln.yaml", "--framework", "torch", "--check", "values", "--check", "gradients")
    there = ("--executor-python", f"mxnet={MXNET_PYTHON}")
    env = {"PYTHONPATH": str(ROOT)}
    green = pytest_run("-q", *run, *there, "--impl", "layer_conformance.reference_impls.torch.layernorm:LayerNorm",
                       cwd=tmp_path, env=env)
    assert green.returncode == 0, green.stdout[-3000:] + green.stderr[-2000:]
    red = pytest_run("-q", *run, *there, "--impl", "tests.mutants.torch_contracts:LayerNormUnbiasedVariance",
                     "--dtype", "float32", cwd=tmp_path, env=env)
    assert red.returncode == 1, red.stdout[-3000:]
    assert ("values failed: layer tests.mutants.torch_contracts:LayerNormUnbiasedVariance (torch) vs reference "
            "layer_conformance.reference_impls.mxnet.layernorm:LayerNorm (mxnet): case 'random'") in red.stdout
    if not installed("mxnet"):   # without its environment: the contract's problem, said at load (exit 3)
        alone = pytest_run("-q", *run, "--impl", "layer_conformance.reference_impls.torch.layernorm:LayerNorm",
                           cwd=tmp_path, env=env)
        assert alone.returncode == 3, alone.stdout[-2000:] + alone.stderr[-2000:]
        assert "give its environment with --executor-python mxnet=PYTHON" in alone.stdout + alone.stderr


def test_the_reference_state_map_hint_is_said_as_the_contract_field():
    # the reference's map is the contract's reference.state_map, not the --state-map option
    from layer_conformance.impl_reference import _as_yaml
    said = _as_yaml("cannot find state slot(s) 'w1', 'w3' in the layer (its state: ['w1.weight', 'w3.weight']); "
                    "use --state-map w1=w1.weight --state-map w3=w3.weight")
    assert said.endswith("""add to the contract's reference.state_map: ["w1=w1.weight", "w3=w3.weight"]"""), said
    assert "--state-map" not in said
