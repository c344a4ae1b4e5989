"""The ``mixed_precision`` check through executors, as the plugin runs it: each framework's mechanism
(Keras dtype policies, torch autocast, flax dtype/param_dtype, MXNet AMP) is applied, a layer that keeps
its variables in the compute dtype fails with a message naming the mistake, correct layers pass, the
float32 master weights and the output dtype are reported, and what a framework lacks is n/a with its reason."""
from pathlib import Path

import pytest

from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.runner import context_for, run_check



def _run(sessions, framework, contract, impl):
    c = load_contract(bundled_contracts()[contract])
    ctx = context_for(c, impl, framework, session=sessions(framework))
    return run_check(ctx, "mixed_precision", timeout=300)


MUTANTS = [
    ("torch", "tests.mutants.torch_contracts:RMSNormStoresBf16Gain",
     ["under torch.autocast('cpu', dtype=torch.bfloat16)", "'gain' is bfloat16, not float32", "nn.Parameter float32"]),
    ("tensorflow", "tests.mutants.tensorflow_contracts:RMSNormComputeDtypeWeights",
     ["under mixed_float16", "'gain' is float16, not float32", "under mixed_bfloat16", "'gain' is bfloat16",
      "add_weight(...) without dtype="]),
    ("tensorflow", "tests.mutants.tensorflow_contracts:RMSNormDropsDtype",
     ["the layer's compute dtype is float32, not float16", "its output is float32", "super().__init__(**kwargs)"]),
    ("jax", "tests.mutants.jax_contracts:RMSNormParamsInDtype",
     ["under dtype=bfloat16, param_dtype=float32", "'gain' is bfloat16, not float32", "param_dtype"]),
    ("mxnet", "tests.mutants.mxnet_contracts:RMSNormCastsUnderAMP",
     ["under amp.init(target_dtype='float16')", "'gain' is float16, not float32", "Block.cast"]),
]


@pytest.mark.full   # a catalogue of mixed-precision mutants, each in every framework's session
@pytest.mark.parametrize("framework,impl,fragments", MUTANTS, ids=[m[1].rpartition(":")[2] for m in MUTANTS])
def test_variables_in_the_compute_dtype_are_caught(sessions, framework, impl, fragments):
    rec = _run(sessions, framework, "rmsnorm", impl)
    assert rec["outcome"] == "failed", rec
    for fragment in fragments:
        assert fragment in rec["message"], rec["message"]


# (framework, contract, impl, {policy: (variables, output dtype)}) for correct layers
PASSING = [
    ("torch", "rmsnorm", "layer_conformance.reference_impls.torch.rmsnorm:IMPL",
     {"torch.autocast('cpu', dtype=torch.bfloat16)": ({"gain": "float32"}, "float32")}),
    ("torch", "linear_vjp", "layer_conformance.reference_impls.torch.linear_vjp:IMPL",
     {"torch.autocast('cpu', dtype=torch.bfloat16)": ({}, "float32")}),
    ("tensorflow", "rmsnorm_bias", "layer_conformance.reference_impls.tensorflow.rmsnorm_bias:IMPL",
     {"mixed_float16": ({"gain": "float32", "bias": "float32"}, "float16"),
      "mixed_bfloat16": ({"gain": "float32", "bias": "float32"}, "bfloat16")}),
    ("jax", "rmsnorm", "tests.near_misses.jax_mixed:RMSNormMixed",
     {"dtype=bfloat16, param_dtype=float32": ({"gain": "float32"}, "bfloat16")}),
    ("mxnet", "rmsnorm", "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL",
     {"amp.init(target_dtype='float16')": ({"gain": "float32"}, "float32")}),
]


@pytest.mark.parametrize("framework,contract,impl,want", PASSING, ids=[f"{p[0]}-{p[1]}" for p in PASSING])
def test_correct_layer_passes_with_float32_variables(sessions, framework, contract, impl, want):
    rec = _run(sessions, framework, contract, impl)
    assert rec["outcome"] == "passed", rec.get("message")  # the whole message: the summary line cuts it
    policies = rec["details"]["policies"]
    for policy, (variables, output) in want.items():
        assert policies[policy]["variables"] == variables, policies[policy]
        assert policies[policy]["output_dtype"] == output, policies[policy]
        assert all(g == variables[n] for n, g in policies[policy]["gradients"].items()), policies[policy]


NOT_APPLICABLE = [
    ("tensorflow", "log1pexp", "layer_conformance.reference_impls.tensorflow.log1pexp:IMPL", "a Keras dtype policy belongs to a layer"),
    ("jax", "rmsnorm", "layer_conformance.reference_impls.jax.rmsnorm:IMPL", "the constructor takes no dtype or param_dtype argument"),
]


@pytest.mark.parametrize("framework,contract,impl,reason", NOT_APPLICABLE, ids=[f"{n[0]}-{n[1]}" for n in NOT_APPLICABLE])
def test_no_mechanism_is_not_applicable_with_its_reason(sessions, framework, contract, impl, reason):
    rec = _run(sessions, framework, contract, impl)
    assert rec["outcome"] == "skipped", rec
    assert reason in rec["message"], rec["message"]


def test_mxnet_says_which_mechanisms_it_has(sessions):
    rec = _run(sessions, "mxnet", "rmsnorm", "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL")
    policies = rec["details"]["policies"]
    assert "whole-model 16-bit, not mixed precision" in policies["Block.cast('float16')"]
    assert "none outside AMP" in policies["a dtype policy (Keras-style)"]
    bf16 = policies["amp.init(target_dtype='bfloat16')"]  # runs where the CPU has oneDNN bf16 kernels
    assert isinstance(bf16, dict) or "no bfloat16 kernels" in bf16, bf16


def test_keras_global_policy_is_left_as_it_was(sessions):
    """The policy is the layer's own (dtype=): the process's global policy stays float32 for later checks."""
    s = sessions("tensorflow")
    c = load_contract(bundled_contracts()["rmsnorm"])
    ctx = context_for(c, "layer_conformance.reference_impls.tensorflow.rmsnorm:IMPL", "tensorflow", session=s)
    assert run_check(ctx, "mixed_precision", timeout=300)["outcome"] == "passed"
    assert run_check(ctx, "values", timeout=300)["outcome"] == "passed"
    layer = ctx.new_layer()
    assert ctx.adapter.dtype_name(ctx.run(layer, ctx.first_inputs())) == "float32"


def test_contract_can_declare_not_applicable(tmp_path, sessions):
    pytest.importorskip("torch")
    import yaml
    data = yaml.safe_load(Path(bundled_contracts()["rmsnorm"]).read_text())
    data["mixed_precision"] = {"not_applicable": "a float32-only layer"}
    path = tmp_path / "rmsnorm.yaml"
    path.write_text(yaml.safe_dump(data))
    c = load_contract(path)
    assert c.mixed_precision.not_applicable == "a float32-only layer"
    # the contract decides before the layer is looked at: a layer that fails the check when it runs (it keeps its
    # gain in bfloat16) is skipped all the same
    ctx = context_for(c, "tests.mutants.torch_contracts:RMSNormStoresBf16Gain", "torch", session=sessions("torch"))
    rec = run_check(ctx, "mixed_precision", timeout=60)
    assert rec["outcome"] == "skipped" and "a float32-only layer" in rec["message"], rec


def test_a_cpu_without_bfloat16_kernels_makes_mxnet_bfloat16_not_applicable(monkeypatch):
    """The CPU, not the layer: where MXNet's oneDNN has no bfloat16 kernels (limited here to AVX2, as on
    a CPU without AVX-512), AMP's bfloat16 policy is n/a with the reason and float16 still runs."""
    from layer_conformance.boundary import Session

    from tests.support import executor_pythons
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")  # read by oneDNN in the executors this session starts
    session = Session(executor_pythons("mxnet"))
    try:
        rec = _run(lambda framework: session, "mxnet", "rmsnorm", "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL")
    finally:
        session.close()
    assert rec["outcome"] == "passed", rec.get("message")
    policies = rec["details"]["policies"]
    assert policies["amp.init(target_dtype='bfloat16')"].startswith(
        "n/a: this CPU has no bfloat16 kernels for MXNet's oneDNN"), policies
    assert policies["amp.init(target_dtype='float16')"]["variables"] == {"gain": "float32"}, policies
