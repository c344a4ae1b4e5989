"""Node ids are built and read back in one place (the plugin, the xdist scheduler, crash records)."""
import pytest

from layer_conformance.nodeids import parse, target_name


@pytest.mark.parametrize("contract,impl,framework,device,dtype,check", [
    ("rmsnorm", None, "torch", "cpu", None, "values"),
    ("causal_mask", "mypkg.layers-v2.Mask", "tensorflow", "cuda", None, "device_parity"),
    ("round_ste", "RoundSTE", "jax", "cpu", None, "second_order"),
    ("rmsnorm", None, "torch", "cpu", "bfloat16", "values"),
    ("rmsnorm", "RMSNorm-float16", "jax", "cpu", "float16", "gradients"),   # an impl label may end like a dtype
    ("log1pexp", "mypkg.F", "mxnet", "cuda", "float64", "gradients"),
])
def test_an_id_reads_back_as_it_was_built(contract, impl, framework, device, dtype, check):
    nodeid = f"specs/{contract}.yaml::{target_name(contract, impl, framework, device, dtype)}::{check}"
    assert parse(nodeid) == {"contract": contract, "impl": impl or "", "framework": framework,
                             "device": device, "dtype": dtype or "", "check": check}
    assert parse(nodeid + "@" + framework)["check"] == check   # xdist's group suffix


def test_other_ids_are_not_conformance_ids():
    assert parse("tests/test_plugin.py::test_user_layer_outside_the_repo") is None


def test_the_default_dtype_keeps_the_id_it_always_had():
    assert target_name("rmsnorm", None, "torch", "cpu") == "rmsnorm[torch-cpu]"
    assert target_name("rmsnorm", None, "torch", "cpu", "bfloat16") == "rmsnorm[torch-cpu-bfloat16]"
    assert parse("specs/rmsnorm.yaml::rmsnorm[torch-cpu]::values")["dtype"] == ""
