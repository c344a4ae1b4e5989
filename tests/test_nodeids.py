"""Node ids are built and read back in one place (the plugin, the xdist scheduler, crash records)."""
import pytest

from harness.nodeids import parse, target_name


@pytest.mark.parametrize("contract,impl,framework,device,check", [
    ("rmsnorm", None, "torch", "cpu", "values"),
    ("causal_mask", "mypkg.layers-v2.Mask", "tensorflow", "cuda", "device_parity"),
    ("round_ste", "RoundSTE", "jax", "cpu", "second_order"),
])
def test_an_id_reads_back_as_it_was_built(contract, impl, framework, device, check):
    nodeid = f"specs/{contract}.yaml::{target_name(contract, impl, framework, device)}::{check}"
    assert parse(nodeid) == {"contract": contract, "impl": impl or "", "framework": framework,
                             "device": device, "check": check}
    assert parse(nodeid + "@" + framework)["check"] == check   # xdist's group suffix


def test_other_ids_are_not_conformance_ids():
    assert parse("tests/test_plugin.py::test_user_layer_outside_the_repo") is None
