"""What the mutant catalogue does not show of ``layout`` and ``aliasing``: a contract that declares its layer
in place (``aliasing: {in_place: true}``) passes a layer that writes into its input and fails one that does
not; where a framework has neither strides nor mutable arrays, both checks are n/a with their reasons."""
from pathlib import Path

import pytest
import yaml

from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.frameworks import installed
from layer_conformance.runner import check_all
from layer_conformance.targets import bundled_impl


def _in_place_contract(tmp_path: Path):
    data = yaml.safe_load(Path(bundled_contracts()["scaled_tanh"]).read_text())
    data["aliasing"] = {"in_place": True}
    path = tmp_path / "scaled_tanh_in_place.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_contract(str(path))


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed here")
def test_a_declared_in_place_layer_passes_and_one_that_is_not_in_place_fails(sessions, tmp_path):
    contract = _in_place_contract(tmp_path)
    got = check_all(contract, "tests.mutants.torch_mutants:ScaledTanhInPlace", "torch", session=sessions("torch"),
                    checks=["aliasing"])
    assert got["aliasing"]["outcome"] == "passed", got["aliasing"]
    got = check_all(contract, bundled_impl("torch", "scaled_tanh"), "torch", session=sessions("torch"),
                    checks=["aliasing"])
    assert got["aliasing"]["outcome"] == "failed", got["aliasing"]
    assert "no input's version counter moved" in got["aliasing"]["message"], got["aliasing"]["message"]


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed here")
def test_a_declared_in_place_layer_has_its_gradients_judged_on_the_run_that_writes(sessions, tmp_path):
    """A layer that returns its input written in place (marked dirty) passes values and gradients (taken on a copy
    of the leaf, which may be written into); one whose backward reads the overwritten input fails gradients, and
    aliasing, which finds its gradient wrong too, is blocked by it, keeping what it saw."""
    contract = _in_place_contract(tmp_path)
    right = check_all(contract, "tests.mutants.torch_mutants:ScaledTanhWrittenInPlace", "torch",
                      session=sessions("torch"), checks=["values", "gradients", "aliasing"])
    assert {c: r["outcome"] for c, r in right.items()} == dict.fromkeys(right, "passed"), right
    assert "gradients agree" in str(right["aliasing"]["details"]), right["aliasing"]
    wrong = check_all(contract, "tests.mutants.torch_mutants:ScaledTanhInPlaceReadsOverwritten", "torch",
                      session=sessions("torch"), checks=["values", "gradients", "aliasing"])
    assert wrong["values"]["outcome"] == "passed", wrong["values"]
    assert wrong["gradients"]["outcome"] == "failed", wrong["gradients"]
    alias = wrong["aliasing"]
    assert alias["outcome"] == "blocked" and alias["blocked_by"] == "gradients", alias
    assert "the gradient of input 'x' with the input written in place" in alias["details"]["symptom"], alias
    assert "reads what the forward overwrote" in alias["details"]["symptom"], alias


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed here")
def test_without_strides_or_mutable_arrays_both_checks_are_not_applicable_with_their_reasons(sessions):
    contract = load_contract(bundled_contracts()["rmsnorm"])
    got = check_all(contract, bundled_impl("jax", "rmsnorm"), "jax", session=sessions("jax"),
                    checks=["layout", "aliasing"])
    for check, words in (("layout", "no strides"), ("aliasing", "immutable")):
        assert got[check]["outcome"] == "skipped" and got[check].get("not_applicable"), got[check]
        assert words in got[check]["message"], got[check]["message"]
    assert "not a function" in got["aliasing"]["message"], got["aliasing"]["message"]


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed here")
def test_a_contract_excuses_layout_alone_with_its_reason(sessions, tmp_path):
    data = yaml.safe_load(Path(bundled_contracts()["rmsnorm"]).read_text())
    data["layout"] = {"not_applicable": "reads its input's storage as a packed buffer"}
    path = tmp_path / "rmsnorm_packed.yaml"
    path.write_text(yaml.safe_dump(data))
    got = check_all(load_contract(str(path)), bundled_impl("torch", "rmsnorm"), "torch", session=sessions("torch"),
                    checks=["layout", "aliasing"])
    assert got["layout"]["outcome"] == "skipped" and got["layout"].get("not_applicable"), got["layout"]
    assert "reads its input's storage as a packed buffer" in got["layout"]["message"], got["layout"]
    assert got["aliasing"]["outcome"] == "passed", got["aliasing"]
