"""Every hint the harness prints is tested twice: a mutant whose failure must carry it, and a near miss
(a correct layer, or one wrong in another way, close to the mutant) whose output must not. The table
below and the hint registry (harness/checks/mistakes.py HINTS) must cover each other exactly, for every
framework a hint has its own words for. The checks run through executors, as under pytest."""
from pathlib import Path

import pytest

from harness import adapters
from harness.checks.mistakes import HINTS, hint
from harness.contract import bundled_contracts, load_contract
from harness.executor import Session
from harness.runner import context_for, run_check

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"

T, TF, J, MX = "tests.mutants.torch_mutants", "tests.mutants.tensorflow_mutants", "tests.mutants.jax_mutants", \
    "tests.mutants.mxnet_mutants"
TC, TFC, JC, MXC = (f"tests.mutants.{fw}_contracts" for fw in ("torch", "tensorflow", "jax", "mxnet"))
NT, NJ, NMX = "tests.near_misses.torch_hints", "tests.near_misses.jax_hints", "tests.near_misses.mxnet_hints"
REF = "reference_impls.{fw}.{contract}:{attr}"

# hint id, framework, contract, the check that prints it, the mutant, the near miss
CASES = [
    ("register_trainable", "torch", "rmsnorm", "parameters", f"{T}:GainPlainTensor", f"{T}:GainAsBuffer"),
    ("register_trainable", "tensorflow", "rmsnorm", "parameters", f"{TF}:GainRawVariable", f"{TF}:GainNotTrainable"),
    ("register_trainable", "jax", "rmsnorm", "parameters", f"{J}:GainRawArray", f"{NJ}:GainAsBuffer"),
    ("register_trainable", "mxnet", "rmsnorm", "parameters", f"{MX}:GainInList", f"{NMX}:GainFrozen"),
    ("make_trainable", "torch", "rmsnorm", "parameters", f"{T}:GainAsBuffer", f"{T}:GainPlainTensor"),
    ("make_trainable", "tensorflow", "rmsnorm", "parameters", f"{TF}:GainNotTrainable", f"{TF}:GainRawVariable"),
    ("make_trainable", "jax", "rmsnorm", "parameters", f"{NJ}:GainAsBuffer", f"{J}:GainRawArray"),
    ("make_trainable", "mxnet", "rmsnorm", "parameters", f"{NMX}:GainFrozen", f"{MX}:GainInList"),
    ("counted_as_trainable", "torch", "causal_mask", "buffers", f"{T}:MaskAsParameter", f"{T}:MaskPlainAttribute"),
    ("counted_as_trainable", "tensorflow", "causal_mask", "buffers", f"{TF}:MaskTrainable", f"{TF}:MaskPlainTensor"),
    ("counted_as_trainable", "jax", "causal_mask", "buffers", f"{J}:MaskAsParam", f"{J}:MaskRawArray"),
    ("counted_as_trainable", "mxnet", "causal_mask", "buffers", f"{MX}:MaskAsParameter", f"{MX}:MaskPlainArray"),
    ("register_buffer", "torch", "causal_mask", "buffers", f"{T}:MaskPlainAttribute", f"{T}:MaskNotPersistent"),
    ("register_buffer", "tensorflow", "causal_mask", "buffers", f"{TF}:MaskPlainTensor", f"{TFC}:MaskDiagonal"),
    ("register_buffer", "jax", "causal_mask", "buffers", f"{J}:MaskRawArray", f"{JC}:MaskDiagonal"),
    ("register_buffer", "mxnet", "causal_mask", "buffers", f"{MX}:MaskPlainArray", f"{MX}:MaskNotAttribute"),
    ("not_persistent", "torch", "causal_mask", "buffers", f"{T}:MaskNotPersistent", f"{T}:MaskPlainAttribute"),
    ("not_persistent", "mxnet", "causal_mask", "buffers", f"{MX}:MaskNotAttribute", f"{MX}:MaskPlainArray"),
    # the issue's example: a slot held as a plain tensor is parameters' to name; no other check may send
    # the user to --state-map, which would not help
    ("state_map", "torch", "rmsnorm_bias", "parameters", f"{NT}:RenamedAmbiguous", f"{NT}:BiasPlainTensor"),
    ("zero_gradient", "torch", "sign_ste", "gradients", f"{TC}:sign_plain", f"{TC}:SignHardtanhSTE"),
    ("zero_gradient_framework", "torch", "round_ste", "gradients", f"{T}:ste_forward_called_directly",
     f"{T}:STEDoubled"),
    ("zero_gradient_framework", "mxnet", "round_ste", "gradients", f"{MX}:ste_forward_called_directly",
     f"{MX}:STEDoubled"),
    ("scaled_gradient", "torch", "round_ste", "gradients", f"{T}:STEDoubled", f"{T}:ste_forward_called_directly"),
    ("rule_not_differentiable", "torch", "log1pexp", "second_order", f"{TC}:Log1pExpDetachedBackward",
     f"{TC}:log1pexp_plain_autodiff"),
    ("rms_eps_outside_sqrt", "torch", "rmsnorm", "values", f"{T}:EpsOutsideSqrt", f"{T}:WrongAxis"),
    ("rms_eps_outside_sqrt", "tensorflow", "rmsnorm", "values", f"{TF}:EpsOutsideSqrt", f"{TF}:WrongAxis"),
    ("rms_eps_outside_sqrt", "jax", "rmsnorm", "values", f"{J}:EpsOutsideSqrt", f"{J}:WrongAxis"),
    ("rms_eps_outside_sqrt", "mxnet", "rmsnorm", "values", f"{MX}:EpsOutsideSqrt",
     "tests.mutants.mxnet_contracts:BiasBeforeScale"),
    ("rms_wrong_axis", "torch", "rmsnorm", "values", f"{T}:WrongAxis", f"{T}:EpsOutsideSqrt"),
    ("rms_eps_dropped", "torch", "rmsnorm", "values", f"{NT}:EpsDropped", f"{T}:EpsOutsideSqrt"),
    ("compiled_side_effect", "jax", "rmsnorm", "compiled", "tests.mutants.jax_compiled:RMSNormCallCounter",
     "reference_impls.jax.rmsnorm:RMSNorm"),
    ("compiled_reads_value", "tensorflow", "rmsnorm", "compiled",
     "tests.mutants.tensorflow_compiled:RMSNormPythonBranch", "reference_impls.tensorflow.rmsnorm:RMSNorm"),
    ("compiled_reads_value", "mxnet", "rmsnorm", "compiled", "tests.mutants.mxnet_compiled:RMSNormAsnumpy",
     "reference_impls.mxnet.rmsnorm:RMSNorm"),
    ("export_save:torch.save", "torch", "rmsnorm", "export", "tests.mutants.torch_export:LambdaAttribute",
     "tests.mutants.torch_export:RandomNonPersistentBuffer"),
    ("export_value:state_dict", "torch", "rmsnorm", "export", "tests.mutants.torch_export:RandomNonPersistentBuffer",
     "tests.mutants.torch_export:LambdaAttribute"),
    ("keras_kwargs", "tensorflow", "rmsnorm", "export", "tests.mutants.tensorflow_export:NoKwargs",
     "tests.mutants.tensorflow_export:ConfigWithoutArguments"),
    ("keras_config_args", "tensorflow", "rmsnorm", "export", "tests.mutants.tensorflow_export:ConfigWithoutArguments",
     "tests.mutants.tensorflow_export:NoKwargs"),
    ("export_save:jax.export", "jax", "log1pexp", "export", "tests.mutants.jax_export:log1pexp_numpy_backward",
     "reference_impls.jax.log1pexp:log1pexp"),
    ("centered_median", "torch", "centered", "values", f"{TC}:CenteredMedian", "reference_impls.torch.centered:CenteredLayer"),
]

# mixed precision (the opt-in mixed_precision check): variables kept in the compute dtype, a policy not taken
CASES += [
    ("mixed_variables_low", "torch", "rmsnorm", "mixed_precision", f"{TC}:RMSNormStoresBf16Gain",
     "reference_impls.torch.rmsnorm:IMPL"),
    ("mixed_variables_low", "tensorflow", "rmsnorm", "mixed_precision", f"{TFC}:RMSNormComputeDtypeWeights",
     f"{TFC}:RMSNormDropsDtype"),
    ("mixed_variables_low", "jax", "rmsnorm", "mixed_precision", f"{JC}:RMSNormParamsInDtype",
     "tests.near_misses.jax_mixed:RMSNormMixed"),
    ("mixed_variables_low", "mxnet", "rmsnorm", "mixed_precision", f"{MXC}:RMSNormCastsUnderAMP",
     "reference_impls.mxnet.rmsnorm:IMPL"),
    ("mixed_policy_ignored", "tensorflow", "rmsnorm", "mixed_precision", f"{TFC}:RMSNormDropsDtype",
     f"{TFC}:RMSNormComputeDtypeWeights"),
]
# hints whose mutant is still to be written, with what it needs: each is reported as an expected failure
# (strict: once it has its rows, it must leave this list)
PENDING: dict = {
    "compiled_backward_unused": "a layer whose custom backward the compiler drops (zero gradient compiled only)",
    "compiled_frozen_state": "a layer reading a Python global that changes between calls, with no side effect",
    "export_save:torch.export": "a forward with Python control flow on tensor values",
    "export_save:keras": "a constructor argument that is not a plain value, with no get_config",
    "export_save:savedmodel": "a call() with a numpy call on a tensor",
    "export_save:nnx": "a module holding an unpicklable static attribute (a lambda)",
    "export_save:gluon.export": "a HybridBlock calling .asnumpy() in hybrid_forward",
    "export_load:torch.save": "a module class defined inside a function",
    "export_load:state_dict": "a constructor that builds other state than the saved one",
    "export_load:keras": "a load error none of the keras_* hints recognizes",
    "export_load:nnx": "a module class defined inside a function",
    "export_value:torch.save": "an output that reads a class attribute changed at run time",
    "export_value:keras": "an attribute set after construction that the output reads",
    "export_value:nnx": "an output that reads a module-level global changed at run time",
    "keras_build": "a weight created lazily in call()",
    "keras_config": "a load error that names get_config",
}


def _ids(case):
    return f"{case[0]}-{case[1]}"


def _framework_ok(fw):
    if fw == "mxnet":
        return MXNET_PYTHON.exists()
    return adapters.installed(fw)


@pytest.fixture(scope="module")
def session():
    s = Session(pythons={"mxnet": str(MXNET_PYTHON)} if MXNET_PYTHON.exists() else {})
    yield s
    s.close()


def _message(session, framework, contract, check, impl) -> str:
    c = load_contract(bundled_contracts()[contract])
    ctx = context_for(c, impl, framework, session=session)
    return run_check(ctx, check)


@pytest.mark.parametrize("hint_id", sorted(PENDING))
@pytest.mark.xfail(strict=True, reason="no mutant and near miss for this hint yet")
def test_pending_hint_has_rows(hint_id):
    assert hint_id in {h for h, *_ in CASES}, PENDING[hint_id]


def test_every_hint_has_a_mutant_and_a_near_miss():
    """A new hint (or a framework's own words for one) without its two rows fails here."""
    covered = {(h, fw) for h, fw, *_ in CASES}
    for hint_id, h in HINTS.items():
        if hint_id in PENDING:
            continue
        frameworks = set(h.by_framework) or {fw for i, fw in covered if i == hint_id} or {"(any)"}
        missing = {fw for fw in frameworks if (hint_id, fw) not in covered}
        assert not missing, f"hint {hint_id!r} has no mutant/near-miss row for {sorted(missing)}"
    unknown = {h for h, *_ in CASES} - set(HINTS)
    assert not unknown, f"rows for hints the registry does not have: {sorted(unknown)}"
    assert not set(PENDING) - set(HINTS)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_hint_on_mutant_and_not_on_near_miss(session, case):
    hint_id, fw, contract, check, mutant, near = case
    if not _framework_ok(fw):
        pytest.skip(f"{fw} is not installed here")
    # the doubled surrogate's ratio; the compilers' names as the checks say them
    values = {"scaled_gradient": {"ratio": "2"}}.get(hint_id, {})
    text = hint(hint_id, fw, **values) if "{compiler}" not in HINTS[hint_id].text else \
        HINTS[hint_id].text.split("{compiler}")[-1]
    got = _message(session, fw, contract, check, mutant)
    assert got["outcome"] == "failed", got
    assert text.strip() in got["message"], got["message"]
    other = _message(session, fw, contract, check, near)
    assert text.strip() not in other["message"], other["message"]


def test_readme_failure_example_is_what_the_harness_prints(session):
    """The README's one-mistake example: its failure text is the parameters check's message, word for word."""
    readme = (ROOT / "README.md").read_text()
    block = readme.rsplit("::parameters failed: ", 1)[1].split("\nSKIPPED", 1)[0]
    said = " ".join(line.strip() for line in block.splitlines())
    got = _message(session, "torch", "rmsnorm", "parameters", f"{T}:GainPlainTensor")
    assert got["outcome"] == "failed" and got["message"] == said, (got["message"], said)
    blocked = _message(session, "torch", "rmsnorm", "gradients", f"{T}:GainPlainTensor")
    assert f"SKIPPED ...::gradients: {blocked['message']}" in readme, blocked
