"""Every hint the harness prints is tested twice: a mutant whose failure must carry it, and a near miss
(a correct layer, or one wrong in another way, close to the mutant) whose output must not. The table
below and the hint registry (harness/checks/mistakes.py HINTS) must cover each other exactly, for every
framework a hint has its own words for. The checks run through executors, as under pytest."""
from pathlib import Path

import pytest

from layer_conformance.frameworks import FRAMEWORKS, installed
from layer_conformance.checks.mistakes import HINTS, hint
from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.boundary import Session
from layer_conformance.runner import context_for, run_check

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"

T, TF, J, MX = "tests.mutants.torch_mutants", "tests.mutants.tensorflow_mutants", "tests.mutants.jax_mutants", \
    "tests.mutants.mxnet_mutants"
TC, TFC, JC, MXC = (f"tests.mutants.{fw}_contracts" for fw in ("torch", "tensorflow", "jax", "mxnet"))
NT, NJ, NMX = "tests.near_misses.torch_hints", "tests.near_misses.jax_hints", "tests.near_misses.mxnet_hints"
TCO, MXCO = "tests.mutants.torch_compiled", "tests.mutants.mxnet_compiled"
TE, TFE, JE = "tests.mutants.torch_export", "tests.mutants.tensorflow_export", "tests.mutants.jax_export"

# hint id, framework, contract, the check that prints it, the mutant, the near miss
CASES = [
    ("register_trainable", "torch", "rmsnorm", "parameters", f"{T}:GainPlainTensor", f"{T}:GainAsBuffer"),
    ("register_trainable", "tensorflow", "rmsnorm", "parameters", f"{TF}:GainRawVariable", f"{TF}:GainNotTrainable"),
    ("register_trainable", "jax", "rmsnorm", "parameters", f"{J}:GainRawArray", f"{NJ}:GainAsBuffer"),
    ("register_trainable", "mxnet", "rmsnorm", "parameters", f"{MX}:GainInList", f"{NMX}:GainFrozen"),
    # plain tensors in a list: nn.Parameter first (the container hint alone would leave them unregistered)
    ("register_trainable", "torch", "rmsnorm", "parameters", f"{NT}:GainTensorsInList", f"{T}:GainInList"),
    # an NDArray attribute: the hint writes the slot's own name and shape in valid 1.9.1 Gluon
    ("register_trainable", "mxnet", "rmsnorm", "parameters", f"{NMX}:GainNDArray", f"{NMX}:GainFrozen"),
    # nn.Parameters already, in a plain list or dict: the container, not nn.Parameter again
    ("register_in_container", "torch", "rmsnorm", "parameters", f"{T}:GainInList", f"{NT}:GainTensorsInList"),
    ("register_in_container", "torch", "rmsnorm", "parameters", f"{NT}:GainInDict", f"{T}:GainPlainTensor"),
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
    # a rule that ran and returned zeros is not a rule that never ran: told apart by the recorded graph
    ("zero_gradient", "torch", "round_ste", "gradients", f"{T}:ste_forward_called_directly", f"{T}:STEZeroBackward"),
    ("zero_gradient_framework", "torch", "round_ste", "gradients", f"{T}:ste_forward_called_directly",
     f"{T}:STEZeroBackward"),
    ("zero_gradient_rule_ran", "torch", "round_ste", "gradients", f"{T}:STEZeroBackward",
     f"{T}:ste_forward_called_directly"),
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
    # the wrong axis mixes the batch, which batching names (values is blocked by it): with batching excused, values
    # names the known mistake
    ("rms_wrong_axis", "torch", "rmsnorm+batching: {not_applicable: the row of the known mistake}", "values",
     f"{T}:WrongAxis", f"{T}:EpsOutsideSqrt"),
    ("rms_eps_dropped", "torch", "rmsnorm", "values", f"{NT}:EpsDropped", f"{T}:EpsOutsideSqrt"),
    ("compiled_side_effect", "jax", "rmsnorm", "compiled", "tests.mutants.jax_compiled:RMSNormCallCounter",
     "layer_conformance.reference_impls.jax.rmsnorm:RMSNorm"),
    ("compiled_traced_branch", "jax", "rmsnorm", "compiled", "tests.mutants.jax_compiled:RMSNormArrayPath",
     "tests.mutants.jax_compiled:RMSNormCallCounter"),
    ("compiled_reads_value", "tensorflow", "rmsnorm", "compiled",
     "tests.mutants.tensorflow_compiled:RMSNormPythonBranch", "layer_conformance.reference_impls.tensorflow.rmsnorm:RMSNorm"),
    ("compiled_reads_value", "mxnet", "rmsnorm", "compiled", "tests.mutants.mxnet_compiled:RMSNormAsnumpy",
     "layer_conformance.reference_impls.mxnet.rmsnorm:RMSNorm"),
    ("batching_mixes", "torch", "rmsnorm", "batching", f"{T}:BatchMeanSquare", f"{T}:InferenceMemo"),
    ("batching_python_state", "torch", "rmsnorm", "batching", f"{T}:InferenceMemo", f"{T}:BatchMeanSquare"),
    ("batching_reads_value", "torch", "rmsnorm", "batching", "tests.mutants.torch_export:NaNGuard",
     f"{T}:InferenceMemo"),
    ("batching_closed_over", "jax", "softmax_cross_entropy", "batching", f"{J}:sce_closes_over_labels",
     "layer_conformance.reference_impls.jax.softmax_cross_entropy:IMPL"),
    ("construction_factory_ignored", "torch", "rmsnorm", "construction", f"{T}:GainIgnoresDevice",
     f"{T}:GainNoResetParameters"),
    ("construction_reset_incomplete", "torch", "rmsnorm_bias", "construction", f"{T}:BiasNotReset",
     "layer_conformance.reference_impls.torch.rmsnorm_bias:IMPL"),
    # a contract variant (``+`` and its YAML line, appended): reset_parameters required
    ("construction_no_reset_parameters", "torch", "rmsnorm+construction: {reset_parameters: required}",
     "construction", f"{T}:GainNoResetParameters", "layer_conformance.reference_impls.torch.rmsnorm:IMPL"),
    ("construction_weights_in_call", "tensorflow", "rmsnorm", "construction", f"{TF}:GainAddedInCall",
     "layer_conformance.reference_impls.tensorflow.rmsnorm:IMPL"),
    ("construction_reads_in_init", "jax", "rmsnorm", "construction", f"{J}:GainCheckedInInit",
     "layer_conformance.reference_impls.jax.rmsnorm:IMPL"),
    ("layout_view", "torch", "scaled_tanh", "layout", f"{T}:ScaledTanhViewBackward",
     "layer_conformance.reference_impls.torch.scaled_tanh:IMPL"),
    ("layout_storage_order", "torch", "rmsnorm", "layout", f"{T}:RMSNormAsStrided",
     "layer_conformance.reference_impls.torch.rmsnorm:RMSNorm"),
    ("aliasing_mutates_input", "torch", "scaled_tanh", "aliasing", f"{T}:ScaledTanhInPlace",
     f"{T}:ScaledTanhViewBackward"),
    ("aliasing_same_tensor", "torch", "linear_vjp", "aliasing", f"{T}:LinearGradsById",
     "layer_conformance.reference_impls.torch.linear_vjp:IMPL"),
    ("abstract_output_shape", "tensorflow", "rmsnorm", "abstract", f"{TF}:WrongOutputShape", f"{TF}:BatchMeanSquare"),
    ("abstract_reads_value", "torch", "rmsnorm", "abstract", f"{T}:BatchAsPythonInt", f"{T}:BatchFromFirstCall"),
    ("abstract_reads_value", "jax", "rmsnorm", "abstract", f"{J}:NaNGuardItem", f"{J}:BatchMeanSquare"),
    ("abstract_fixed_batch", "torch", "rmsnorm", "abstract", f"{T}:BatchFromFirstCall", f"{T}:BatchAsPythonInt"),
    ("abstract_held_tensor", "torch", "rmsnorm", "abstract", f"{T}:InferenceMemo", f"{T}:BatchFromFirstCall"),
    ("export_save:torch.save", "torch", "rmsnorm", "export", "tests.mutants.torch_export:LambdaAttribute",
     "tests.mutants.torch_export:RandomNonPersistentBuffer"),
    ("export_value:state_dict", "torch", "rmsnorm", "export", "tests.mutants.torch_export:RandomNonPersistentBuffer",
     "tests.mutants.torch_export:LambdaAttribute"),
    ("keras_kwargs", "tensorflow", "rmsnorm", "export", "tests.mutants.tensorflow_export:NoKwargs",
     "tests.mutants.tensorflow_export:ConfigWithoutArguments"),
    ("keras_config_args", "tensorflow", "rmsnorm", "export", "tests.mutants.tensorflow_export:ConfigWithoutArguments",
     "tests.mutants.tensorflow_export:NoKwargs"),
    ("export_save:jax.export", "jax", "log1pexp", "export", "tests.mutants.jax_export:log1pexp_numpy_backward",
     "layer_conformance.reference_impls.jax.log1pexp:log1pexp"),
    ("centered_median", "torch", "centered", "values", f"{TC}:CenteredMedian", "layer_conformance.reference_impls.torch.centered:CenteredLayer"),
    ("compiled_backward_unused", "torch", "round_ste", "compiled", f"{TCO}:round_ste_eager_only",
     f"{TCO}:round_ste_annealed"),
    ("compiled_frozen_state", "mxnet", "dropout", "compiled", f"{MXCO}:DropoutPythonFlag", f"{MXCO}:DropoutOp"),
    ("export_save:torch.export", "torch", "rmsnorm", "export", f"{TE}:NaNGuard", f"{TE}:LambdaAttribute"),
    ("export_save:keras", "tensorflow", "rmsnorm", "export", f"{TFE}:rmsnorm_initializer_object", f"{TFE}:NoKwargs"),
    ("export_save:savedmodel", "tensorflow", "rmsnorm", "export", f"{TFE}:NumpyNaNGuard",
     f"{TFE}:rmsnorm_initializer_object"),
    ("export_save:nnx", "jax", "rmsnorm", "export", f"{JE}:LambdaAttribute", f"{JE}:EpsAsGlobal"),
    ("export_save:gluon.export", "mxnet", "rmsnorm", "export", f"{MXCO}:RMSNormAsnumpy", f"{MXCO}:RMSNormHybrid"),
    ("export_load:state_dict", "torch", "rmsnorm", "export", f"{TE}:KeysRenamedOnSave",
     f"{TE}:RandomNonPersistentBuffer"),
    ("export_load:keras", "tensorflow", "rmsnorm", "export", f"{TFE}:BuildChecksTuple", f"{TFE}:NoKwargs"),
    ("export_value:torch.save", "torch", "rmsnorm", "export", f"{TE}:EpsOnTheClass", f"{TE}:RandomNonPersistentBuffer"),
    ("export_value:keras", "tensorflow", "rmsnorm", "export", f"{TFE}:ConfigWithoutEps", f"{TFE}:ConfigWithoutArguments"),
    ("export_value:nnx", "jax", "rmsnorm", "export", f"{JE}:EpsAsGlobal", f"{JE}:LambdaAttribute"),
    ("keras_build", "tensorflow", "rmsnorm_bias", "export", f"{TFE}:ConfigWithoutBias",
     "layer_conformance.reference_impls.tensorflow.rmsnorm_bias:RMSNorm"),
    ("keras_config", "tensorflow", "rmsnorm", "export", f"{TFE}:ConfigWithoutKeywordOnly",
     f"{TFE}:ConfigWithoutArguments"),
]

# each framework's own words where the fix is said in code: a Keras layer that reads int(X.shape[0]) is not told
# to read x.shape[0] (the None it read), an NNX layer that loops range() over the rows is told JAX's fix, and a Gluon
# block is told about its graph, not Keras' compute_output_shape
TW, JW, MXW = "tests.near_misses.tensorflow_wording", "tests.near_misses.jax_wording", "tests.near_misses.mxnet_wording"
CASES += [
    ("abstract_fixed_batch", "tensorflow", "rmsnorm", "abstract", f"{TW}:BatchFromStaticShape", f"{TF}:WrongOutputShape"),
    ("abstract_fixed_batch", "jax", "rmsnorm", "abstract", f"{JW}:RowLoop", f"{J}:NaNGuardItem"),
    ("abstract_fixed_batch", "mxnet", "rmsnorm", "abstract", f"{MXW}:BatchHardCoded", f"{MX}:DropsNaNRows"),
    ("abstract_output_shape", "mxnet", "rmsnorm", "abstract", f"{MX}:DropsNaNRows", f"{MXW}:BatchHardCoded"),
]

# mixed precision (the opt-in mixed_precision check): variables kept in the compute dtype, a policy not taken
CASES += [
    ("mixed_variables_low", "torch", "rmsnorm", "mixed_precision", f"{TC}:RMSNormStoresBf16Gain",
     "layer_conformance.reference_impls.torch.rmsnorm:IMPL"),
    ("mixed_variables_low", "tensorflow", "rmsnorm", "mixed_precision", f"{TFC}:RMSNormComputeDtypeWeights",
     f"{TFC}:RMSNormDropsDtype"),
    ("mixed_variables_low", "jax", "rmsnorm", "mixed_precision", f"{JC}:RMSNormParamsInDtype",
     "tests.near_misses.jax_mixed:RMSNormMixed"),
    ("mixed_variables_low", "mxnet", "rmsnorm", "mixed_precision", f"{MXC}:RMSNormCastsUnderAMP",
     "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL"),
    ("mixed_policy_ignored", "tensorflow", "rmsnorm", "mixed_precision", f"{TFC}:RMSNormDropsDtype",
     f"{TFC}:RMSNormComputeDtypeWeights"),
]

# accumulation precision (accumulate: float32), in a 16-bit dtype (the row's 7th entry): a running sum kept in
# that dtype, against squares rounded to float16 but summed in float32 (wrong on the long rows another way)
CASES += [
    ("accumulated_16bit", "torch", "rmsnorm_long_rows", "values", f"{TC}:RMSNormAccumulates16",
     f"{TC}:RMSNorm16BitStatistic", "float16"),
    ("accumulated_16bit", "mxnet", "rmsnorm_long_rows", "values", f"{MXC}:RMSNormAccumulates16",
     f"{MXC}:RMSNormPromotes", "float16"),
]

# the precision a failure in a dtype comes from (layer_conformance.checks.precision): the statistic in the input's dtype,
# float64 computed in float32, an error neither explains; near misses right in that dtype, or wrong another way
CASES += [("computes_narrow", fw, "rmsnorm", "values", f"tests.mutants.{fw}_precision:RMSNormChapter",
           f"tests.mutants.{fw}_precision:RMSNormFloat32Inside", "float16") for fw in ("torch", "tensorflow", "jax", "mxnet")]
# an intermediate that overflows the dtype (exp(x) in float16) is told so, and the stable forms: not RMSNorm's
# "compute the statistic" (the near misses: the bundled stable references)
CASES += [("computes_narrow_overflow", fw, "log1pexp", "values", mutant, f"layer_conformance.reference_impls.{fw}."
           f"log1pexp:IMPL", "float16") for fw, mutant in (
    ("torch", "tests.near_misses.torch_wording:Log1pExpNaive"), ("tensorflow", f"{TW}:log1pexp_naive"),
    ("jax", f"{JW}:log1pexp_naive"), ("mxnet", f"{MXW}:Log1pExpNaive"))]
CASES += [
    ("computes_float32", "torch", "rmsnorm", "gradients", "tests.mutants.torch_precision:RMSNormFloat32Inside",
     "tests.mutants.torch_precision:RMSNormChapter", "float64"),
    ("precision_unexplained", "torch", "rmsnorm", "values", "tests.mutants.torch_precision:RMSNormEpsFor64",
     "tests.mutants.torch_precision:RMSNormFloat32Inside", "float64"),
]


def _ids(case):
    return f"{case[0]}-{case[1]}"


def _framework_ok(fw):
    if fw == "mxnet":
        return MXNET_PYTHON.exists()
    return installed(fw)


@pytest.fixture(scope="module")
def session():
    s = Session(pythons={"mxnet": str(MXNET_PYTHON)} if MXNET_PYTHON.exists() else {})
    yield s
    s.close()


def _message(session, framework, contract, check, impl, dtype=None) -> str:
    contract, _, extra = contract.partition("+")  # a bundled contract with a line of YAML appended
    path = bundled_contracts()[contract]
    c = load_contract(path, raw=Path(path).read_bytes() + f"\n{extra}\n".encode() if extra else None)
    ctx = context_for(c, impl, framework, session=session, dtype=dtype)
    return run_check(ctx, check)


def test_every_hint_has_a_mutant_and_a_near_miss():
    """A new hint (or a framework's own words for one) without its two rows fails here."""
    covered = {(h, fw) for h, fw, *_ in CASES}
    for hint_id, h in HINTS.items():
        frameworks = set(h.by_framework) or {fw for i, fw in covered if i == hint_id} or {"(any)"}
        missing = {fw for fw in frameworks if (hint_id, fw) not in covered}
        assert not missing, f"hint {hint_id!r} has no mutant/near-miss row for {sorted(missing)}"
    unknown = {h for h, *_ in CASES} - set(HINTS)
    assert not unknown, f"rows for hints the registry does not have: {sorted(unknown)}"


@pytest.mark.full   # a catalogue: 62 cases, about 4 minutes of the fast tier's time on a loaded 2-core machine
@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_hint_on_mutant_and_not_on_near_miss(session, case):
    hint_id, fw, contract, check, mutant, near, *dtype = case
    dtype = dtype[0] if dtype else None
    if not _framework_ok(fw):
        pytest.skip(f"{fw} is not installed here")
    # the doubled surrogate's ratio; the compilers' names as the checks say them; the row's dtype
    values = {"scaled_gradient": {"ratio": "2"}, "register_trainable": {"slot": "gain", "shape": (8,)},
              "accumulated_16bit": {"dtype": dtype, "accumulate": "float32"},
              "computes_narrow": {"dtype": dtype, "wide": "float32"},
              "computes_narrow_overflow": {"dtype": dtype, "wide": "float32"},
              "precision_unexplained": {"dtype": dtype}, "batching_mixes": {"axis": 0}}.get(hint_id, {})
    text = hint(hint_id, fw, **values) if "{compiler}" not in HINTS[hint_id].text else \
        HINTS[hint_id].text.split("{compiler}")[-1]
    got = _message(session, fw, contract, check, mutant, dtype)
    assert got["outcome"] == "failed", got
    assert text.strip() in got["message"], got["message"]
    # said once, however many cases and slots show the mistake
    assert got["message"].count(text.strip()) == 1, got["message"]
    # never another framework's words for the same mistake, where they differ (a Keras layer told torch's fix)
    for foreign in {hint(hint_id, o, **values).strip() for o in HINTS[hint_id].by_framework if o != fw} - {text.strip()}:
        assert foreign not in got["message"], got["message"]
    other = _message(session, fw, contract, check, near, dtype)
    assert text.strip() not in other["message"], other["message"]


# a fixed batch, told in the layer's framework's words and never torch's (x.shape[0] is the None a Keras layer read,
# and an NNX layer's loop over range() has no Python int to loop over)
FIXED_BATCH = [("tensorflow", f"{TW}:BatchFromStaticShape", "keras.ops.shape(x)[0]"),
               ("jax", f"{JW}:RowLoop", "jax.vmap over the rows"),
               ("mxnet", f"{MXW}:BatchHardCoded", "in F.reshape's shape")]


@pytest.mark.parametrize("fw, impl, words", FIXED_BATCH, ids=[f[0] for f in FIXED_BATCH])
def test_a_fixed_batch_is_told_the_frameworks_own_fix(session, fw, impl, words):
    if not _framework_ok(fw):
        pytest.skip(f"{fw} is not installed here")
    got = _message(session, fw, "rmsnorm", "abstract", impl)
    assert got["outcome"] == "failed", got
    assert words in got["message"], got["message"]
    assert "(x.shape[0], or -1 in a reshape)" not in got["message"], got["message"]


@pytest.mark.skipif(not MXNET_PYTHON.exists(), reason="no .venv-mxnet here")
def test_a_gluon_block_without_data_is_told_in_gluons_words(session):
    """abstract on a Gluon block whose output shape depends on the data: MXNet's graph and F.* operators, not
    Keras' compute_output_shape."""
    got = _message(session, "mxnet", "rmsnorm", "abstract", f"{MX}:DropsNaNRows")
    assert got["outcome"] == "failed", got
    assert "Keras" not in got["message"] and "compute_output_shape" not in got["message"], got["message"]
    assert "hybrid_forward" in got["message"] and "infer_shape" in got["message"], got["message"]


def test_an_overflow_in_float16_is_not_told_to_compute_a_statistic(session):
    """log(1 + exp(x)) overflowing float16: the overflow and the stable forms, not RMSNorm's words."""
    got = _message(session, "torch", "log1pexp", "values", "tests.near_misses.torch_wording:Log1pExpNaive",
                   "float16")
    assert got["outcome"] == "failed", got
    assert "compute the statistic" not in got["message"], got["message"]
    assert "overflows in float16" in got["message"] and "softplus" in got["message"], got["message"]


def test_a_wrong_initial_value_shows_the_expected_values(session):
    """Not the init rule's name alone ('ones', 'reference'): the values the slot should start at."""
    got = _message(session, "torch", "rmsnorm", "parameters", f"{NT}:GainStartsAtZero")
    assert got["outcome"] == "failed", got
    assert "trainable slot 'gain' starts at [0. 0. 0. ... 0. 0. 0.], expected [1. 1. 1. ... 1. 1. 1.] " \
           "(init: 'ones')" in got["message"], got["message"]
