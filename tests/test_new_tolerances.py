"""The tolerances ``new`` writes (scaffold_text.py): a stated tolerance turns the reference-error rule off for its
check and dtype, so with a numpy reference the measured gaps go only to the checks outside the rule (compiled,
batching, ...) and values and gradients in float32 and 16 bits are left to the rule; float64, and every dtype of an
implementation reference (which the rule does not cover), keep the measured tolerance."""
from layer_conformance.contract import load_contract
from layer_conformance.scaffold import Observed, Slot
from layer_conformance.scaffold_text import OWN_TOLERANCE, contract_yaml
from layer_conformance.tolerances import reference_error_factor, tolerance

GAPS = {("values", "float32"): 3e-4, ("gradients", "float32"): 5e-4, ("values", "bfloat16"): 0.2,
        ("gradients", "float16"): 0.01, ("values", "float64"): 1e-12}


def _drafted(tmp_path, reference: dict):
    seen = Observed(framework="torch", slots=[Slot("w.weight", "w", (4, 4), "float32", True, "random")],
                    output_shape=(2, 4), output_dtype="float32", dtypes=["float32", "float64", "bfloat16", "float16"],
                    refused={}, grad_inputs=["x"], grad_slots=["w"], gaps=dict(GAPS))
    path = tmp_path / "drafted.yaml"
    path.write_text(contract_yaml("drafted", "mypkg:Layer", seen, {"d": 4}, {"x": ((2, 4), "float32")}, reference))
    (tmp_path / "drafted_reference.py").write_text("def forward(x, **_):\n    return x\n")
    return load_contract(path)


def test_a_numpy_reference_leaves_values_and_gradients_to_the_rule(tmp_path):
    contract = _drafted(tmp_path, {"module": "drafted_reference"})
    for check in ("values", "gradients"):
        for dtype in ("float32", "bfloat16", "float16"):
            assert reference_error_factor(contract, check, dtype) == 2.0, (check, dtype)
    for check in OWN_TOLERANCE:   # the larger of the float32 gaps, for each check outside the rule
        assert tolerance(contract, check, "float32")[1] == 5e-4, check
    assert tolerance(contract, "values", "float64")[1] == 1e-12   # float64 is outside the rule: measured


def test_an_implementation_reference_keeps_every_measured_tolerance(tmp_path):
    contract = _drafted(tmp_path, {"impl": "otherpkg:Layer", "framework": "torch"})
    assert tolerance(contract, "values", "float32")[1] == 5e-4
    assert tolerance(contract, "compiled", "float32")[1] == 5e-4
    assert tolerance(contract, "values", "bfloat16")[1] == 0.2
    assert tolerance(contract, "gradients", "float16")[1] == 0.01
