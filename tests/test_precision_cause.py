"""A failure in a dtype says which precision the layer computes at (layer_conformance.checks.precision), in every
framework, through executors as a user's run goes: the source chapter's RMSNorm, whose mean square is taken
in the input's own dtype, fails float16 with "computes in float16 arithmetic"; a layer that computes in
float32 whatever its input fails float64 with "computes float64 inputs at float32 precision"; an error no
precision explains is given in ulps beside the native layer's. The cause is in the JSON details too, and the
correct layers stay green in those dtypes."""
import pytest

from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.runner import context_for, run_check
from tests.mutants.precision_causes import FLOAT32, NARROW

UPCAST = {"torch": "`x.to(torch.float32)`", "tensorflow": '`ops.cast(x, "float32")`',
          "jax": "`x.astype(jnp.float32)`", "mxnet": "`x.astype('float32')`"}
KNOB = "leave {dtype} out of this layer's `dtypes` (a binding's dtypes:, or --dtype)"
# framework, layer, dtype, the check that fails, its cause
CASES = [(fw, f"tests.mutants.{fw}_precision:RMSNormChapter", "float16", "values", "computes_narrow")
         for fw in ("torch", "tensorflow", "jax", "mxnet")]
CASES += [(fw, f"tests.mutants.{fw}_precision:RMSNormFloat32Inside", "float64", check, "computes_float32")
          for fw, check in (("torch", "gradients"), ("tensorflow", "gradients"), ("jax", "gradients"),
                            ("mxnet", "gradients"))]


def _run(sessions, framework, impl, dtype, check):
    contract = load_contract(bundled_contracts()["rmsnorm"])
    # the bundled Keras RMSNorm takes its width from build: d is dropped, as its bindings do
    ctx = context_for(contract, impl, framework, session=sessions(framework), dtype=dtype,
                      arg_map={"d": None} if framework == "tensorflow" else None)
    return run_check(ctx, check)


@pytest.mark.full   # a catalogue of precision mutants (test_the_bundled_layer_passes_where_the_mutants_fail stays fast)
@pytest.mark.parametrize("framework,impl,dtype,check,cause", CASES,
                         ids=[f"{c[0]}-{c[1].rpartition(':')[2]}-{c[2]}" for c in CASES])
def test_failure_names_the_precision_the_layer_computes_at(sessions, framework, impl, dtype, check, cause):
    got = _run(sessions, framework, impl, dtype, check)
    assert got["outcome"] == "failed", got
    message, measured = got["message"], got["details"]["precision"]
    assert measured["cause"] == cause and measured["dtype"] == dtype, measured
    assert KNOB.format(dtype=dtype) in message, message
    if cause == "computes_narrow":
        assert NARROW.format(dtype=dtype) in message and UPCAST[framework] in message, message
        assert measured["wider"] == "float32" and measured["wider_within_tolerance"] is True, measured
    else:
        assert FLOAT32 in message and "float32's epsilon is 1.2e-07" in message, message
        assert 1e-8 < measured["relative_error"] < 1e-5, measured


def test_an_error_no_precision_explains_is_given_in_ulps_beside_the_native_layer(sessions):
    got = _run(sessions, "torch", "tests.mutants.torch_precision:RMSNormEpsFor64", "float64", "values")
    assert got["outcome"] == "failed", got
    measured = got["details"]["precision"]
    assert measured["cause"] == "precision_unexplained" and measured["native"] == "torch.nn.RMSNorm", measured
    assert measured["native_ulps"] <= 4 and measured["error_ulps"] > 1e6, measured
    assert f"torch.nn.RMSNorm is within {measured['native_ulps']:.3g} ulps here" in got["message"], got["message"]
    assert "is not float32's either, so float64 rounding alone does not explain it" in got["message"]
    assert KNOB.format(dtype="float64").replace("this layer's", "its") in got["message"], got["message"]


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax", "mxnet"])
@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_the_bundled_layer_passes_where_the_mutants_fail(sessions, framework, dtype):
    impl = f"layer_conformance.reference_impls.{framework}.rmsnorm:IMPL"
    for check in ("values", "gradients"):
        got = _run(sessions, framework, impl, dtype, check)
        assert got["outcome"] == "passed", got


def test_a_layer_that_changes_its_output_in_a_dtype_is_not_told_it_computes_in_that_arithmetic(sessions):
    """The near miss of computes_narrow: the same layer in float32 is right, but its float16 output is scaled,
    not rounded (the median element is 2^10 ulps away): the cause is not the arithmetic."""
    got = _run(sessions, "torch", "tests.mutants.torch_precision:RMSNormHalvedInFloat16", "float16", "values")
    assert got["outcome"] == "failed", got
    measured = got["details"]["precision"]
    assert measured["cause"] == "precision_unexplained", measured
    assert measured["wider_within_tolerance"] is True and measured["typical_ulps_from_wider"] > 100, measured
    assert NARROW.format(dtype="float16") not in got["message"], got["message"]
