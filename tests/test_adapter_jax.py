"""The JAX / Flax NNX adapter: what the mutant catalogue cannot show on its own."""
import numpy as np
import pytest

pytest.importorskip("flax")

from layer_conformance.layerside import get_adapter  # noqa: E402
from layer_conformance.contract import bundled_contracts, load_contract  # noqa: E402
from layer_conformance.runner import check_all, context_for, run_check  # noqa: E402

ADAPTER = get_adapter("jax")  # before any JAX operation: asks for the second host device
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from layer_conformance.reference_impls.jax import round_ste as ste  # noqa: E402
from layer_conformance.reference_impls.jax.causal_mask import Buffer  # noqa: E402
from layer_conformance.reference_impls.jax.rmsnorm import RMSNorm  # noqa: E402
from tests.zoo import jax_adapter_layers as L  # noqa: E402

# every verdict runs in executors, as a user's run does: the implementations by spec
RMSNORM = "layer_conformance.reference_impls.jax.rmsnorm:RMSNorm"
STE = "layer_conformance.reference_impls.jax.round_ste"
LAYERS = "tests.zoo.jax_adapter_layers"


def contract(name):
    return load_contract(bundled_contracts()[name])


@pytest.fixture
def jax_session(sessions):
    return sessions("jax")


def _executor_x64(ctx) -> bool:
    """jax_enable_x64 as it is now in the layer executor that runs ``ctx``'s checks."""
    return ctx.adapter.save_globals()["x64"]


def test_stop_gradient_ste_agrees_with_custom_vjp(jax_session):
    """X + stop_gradient(round(X) - X) is the same estimator: both pass, with equal values and gradients."""
    c = contract("round_ste")
    for impl in (f"{STE}:round_ste", f"{STE}:round_ste_stop_gradient"):
        records = check_all(c, impl, "jax", checks=["values", "gradients"], session=jax_session)
        assert {k: r["outcome"] for k, r in records.items()} == {"values": "passed", "gradients": "passed"}, records
    w = np.random.default_rng(0).normal(scale=3.0, size=(4, 6)).astype(np.float32)
    ct = np.random.default_rng(1).normal(size=w.shape)
    a = ADAPTER.vjp(ste.round_ste, None, [w], [0], ct)
    b = ADAPTER.vjp(ste.round_ste_stop_gradient, None, [w], [0], ct)
    (g_a,), (g_b,) = a.inputs, b.inputs
    assert np.array_equal(ADAPTER.numpy(a.output), ADAPTER.numpy(b.output))
    assert np.array_equal(ADAPTER.numpy(g_a), ADAPTER.numpy(g_b))
    assert np.array_equal(ADAPTER.numpy(g_a), ct.astype(np.float32))


@pytest.mark.full   # about 16 s on a loaded 2-core machine
def test_rngs_are_supplied_and_rng_state_is_left_out(jax_session):
    records = check_all(contract("rmsnorm"), f"{LAYERS}:RMSNormWithRngs", "jax", session=jax_session)
    assert all(r["outcome"] in ("passed", "skipped") for r in records.values()), records
    layer = ADAPTER.construct(L.RMSNormWithRngs, {"d": 8, "eps": 1e-6})
    assert set(ADAPTER.trainable(layer)) == {"gain"} and ADAPTER.non_trainable(layer) == {}
    assert set(ADAPTER.serialized_state(layer)) == {"gain"}


def test_native_rmsnorm_gets_rngs_and_agrees(jax_session):
    records = check_all(contract("rmsnorm"), RMSNORM, "jax", checks=["native"], session=jax_session)
    assert records["native"]["outcome"] == "passed", records
    assert records["native"]["details"]["max_abs_error"] < 1e-6


def test_round_trip_is_strict():
    small, wide = ADAPTER.construct(RMSNorm, {"d": 4}), ADAPTER.construct(RMSNorm, {"d": 8})
    with pytest.raises(ValueError, match="does not fit"):
        ADAPTER.round_trip(small, wide)

    class Two(nnx.Module):
        def __init__(self):
            self.gain = nnx.Param(jnp.ones(4))
            self.bias = nnx.Param(jnp.zeros(4))
    with pytest.raises(ValueError):
        ADAPTER.round_trip(Two(), small)  # a key the target lacks
    with pytest.raises(ValueError):
        ADAPTER.round_trip(small, Two())  # a key the saved state lacks


def test_non_trainable_state_gets_no_gradient_and_names_are_paths():
    class Net(nnx.Module):
        def __init__(self):
            self.layers = nnx.List([RMSNorm(4), RMSNorm(4)])
            self.scale = Buffer(jnp.full(4, 2.0))

        def __call__(self, X):
            return self.layers[1](self.layers[0](X)) * self.scale[...]

    net = Net()
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    got = ADAPTER.vjp(net, net, [x], [0], np.ones((3, 4)))
    (gx,), grads = got.inputs, got.state
    assert set(grads) == {"layers.0.gain", "layers.1.gain", "scale"}
    assert grads["scale"] is None and grads["layers.1.gain"].shape == (4,) and gx.shape == (3, 4)


def test_finite_differences_run_in_float64_without_leaving_x64_on(jax_session):
    before = jax.config.jax_enable_x64
    ctx = context_for(contract("rmsnorm"), RMSNORM, "jax", session=jax_session)
    in_executor = _executor_x64(ctx)
    rec = run_check(ctx, "gradients")
    assert rec["outcome"] == "passed"
    assert "notes" not in rec.get("details", {}), rec  # not skipped
    # the check switched x64 off again itself: the executor has it as before, and the snapshot taken around the
    # check (which restores and reports whatever a check leaves changed) found nothing to report
    assert _executor_x64(ctx) == in_executor is False
    assert "global_state" not in rec.get("details", {}), rec
    assert jax.config.jax_enable_x64 == before  # and the judge's process never switched it
    layer64 = ADAPTER.to_float64(ADAPTER.construct(RMSNorm, {"d": 8}))
    assert ADAPTER.dtype_name(ADAPTER.trainable(layer64)["gain"]) == "float64"


def test_two_host_devices_and_a_real_move():
    assert ADAPTER.cpu_device == "cpu:0" and "cpu:1" in ADAPTER.devices()
    layer = ADAPTER.construct(RMSNorm, {"d": 8})
    moved = ADAPTER.move(layer, "cpu:1")
    assert ADAPTER.device_of(ADAPTER.trainable(moved)["gain"]) == "cpu:1"
    out = ADAPTER.call(moved, [np.ones((2, 8), np.float32)], device="cpu:1")
    assert ADAPTER.device_of(out) == "cpu:1"


def test_raw_arrays_in_containers_are_untracked():
    class Loose(nnx.Module):
        def __init__(self):
            self.gain = nnx.Param(jnp.ones(3))
            self.extra = nnx.data([jnp.zeros(2)])
            self.table = jnp.zeros((2, 2))

    assert ADAPTER.untracked(Loose()) == {"extra[0]": "jax array [2]", "table": "jax array [2, 2]"}


def test_owns():
    assert ADAPTER.owns(RMSNorm) and ADAPTER.owns(RMSNorm(2)) and ADAPTER.owns(ste.round_ste)
    assert ADAPTER.owns(ste.round_ste_stop_gradient)  # a plain function that names jax
    assert ADAPTER.owns(jax.jit(jnp.round))
    assert not ADAPTER.owns(np.round) and not ADAPTER.owns(lambda x: x) and not ADAPTER.owns(int)


@pytest.mark.parametrize("name,impl,check", [("dropout", "Dropout", "modes"), ("dropout", "Dropout", "native"),
                                             ("rmsnorm_bias", "RMSNormBias", "strict_loading"),
                                             ("safe_norm", "safe_norm", "forward_mode")])
def test_nest_seed_load_state_and_jvp(jax_session, name, impl, check):
    if name not in bundled_contracts():
        pytest.skip(f"no bundled {name} contract")
    rec = check_all(contract(name), f"{LAYERS}:{impl}", "jax", checks=[check], session=jax_session)[check]
    assert rec["outcome"] == "passed", rec


def test_non_strict_load_keeps_what_is_missing():
    full = ADAPTER.construct(L.RMSNormBias, {"d": 4})
    small = ADAPTER.construct(L.RMSNormBias, {"d": 4, "bias": False})
    ADAPTER.assign(small, "gain", np.full(4, 3.0))
    ADAPTER.load_state(full, ADAPTER.export_state(small), strict=False)
    assert ADAPTER.numpy(full.gain).tolist() == [3.0] * 4 and ADAPTER.numpy(full.bias).tolist() == [0.0] * 4
    with pytest.raises(ValueError, match="bias"):
        ADAPTER.load_state(ADAPTER.construct(L.RMSNormBias, {"d": 4}), ADAPTER.export_state(small), strict=True)


def test_global_x64_switch_is_restored_and_reported(jax_session):
    """The layer switches x64 on in its executor: the snapshot around the check puts it back there and says so."""
    ctx = context_for(contract("rmsnorm"), f"{LAYERS}:SwitchesX64On", "jax", session=jax_session)
    assert _executor_x64(ctx) is False
    rec = run_check(ctx, "values")
    assert _executor_x64(ctx) is False  # restored in the process the layer ran in
    assert jax.config.jax_enable_x64 is False
    assert "the layer changed global state (restored): " in " ".join(rec["details"]["global_state"]), rec
    assert "jax x64" in " ".join(rec["details"]["global_state"]), rec


# -- compiled calls: the adapter traces and compiles whole calls, and runs eagerly what does not trace ------
@pytest.mark.full   # every check, compiled and eager: about 30 s on a loaded 2-core machine
def test_a_layer_that_does_not_trace_gets_the_eager_verdicts(jax_session):
    """Forward checks pass as for RMSNorm (run eagerly); differentiating fails as it does eagerly:
    jax.vjp itself traces the layer with abstract values."""
    import inspect
    line = inspect.getsourcelines(L.BranchesOnValues.__call__)[1] + 1
    c = contract("rmsnorm")
    want = {k: r["outcome"] for k, r in check_all(c, RMSNORM, "jax", session=jax_session).items()}
    got = check_all(c, f"{LAYERS}:BranchesOnValues", "jax", session=jax_session)
    differentiated = {"gradients", "device_parity"}
    # jax.jit, jax.export, jax.vmap and jax.eval_shape trace it: it cannot be compiled, exported, vectorised or
    # evaluated without data
    traced = {"compiled", "export", "batching", "abstract"}
    assert {k: r["outcome"] for k, r in got.items() if k not in differentiated | traced} == \
        {k: o for k, o in want.items() if k not in differentiated | traced} and want["values"] == "passed", (want, got)
    for check in differentiated | traced:
        assert got[check]["outcome"] == "failed" and "ConcretizationTypeError" in got[check]["message"], got[check]
        assert f"jax_adapter_layers.py:{line} in __call__)" in got[check]["message"], got[check]["message"]
    assert want["compiled"] == want["export"] == "passed", want


def test_a_numpy_backward_rule_passes_first_order_and_fails_second_order(jax_session):
    records = check_all(contract("log1pexp"), f"{LAYERS}:log1pexp_numpy_bwd", "jax",
                        checks=["values", "gradients", "second_order"], session=jax_session)
    assert records["values"]["outcome"] == records["gradients"]["outcome"] == "passed", records
    assert records["second_order"]["outcome"] == "failed", records
    # the eager error, raised at the numpy line, not a tracer error from a compiled attempt
    assert "TracerArrayConversionError" in records["second_order"]["message"]
    assert "in _numpy_bwd)" in records["second_order"]["message"], records["second_order"]["message"]


def test_an_error_is_the_eager_one_at_the_users_line(jax_session):
    import inspect
    line = inspect.getsourcelines(L.RaisesOnPositiveSum.__call__)[1] + 2
    for check in ("parameters", "values", "gradients"):
        rec = check_all(contract("rmsnorm"), f"{LAYERS}:RaisesOnPositiveSum", "jax", checks=[check],
                        session=jax_session)[check]
        # building the layer raises: `parameters` names it, the others are blocked by it and keep the symptom
        message = rec["message"] if rec["outcome"] == "failed" else rec["details"]["symptom"]
        assert rec["outcome"] == ("failed" if check == "parameters" else "blocked"), rec
        assert "ValueError: refused by the layer" in message, message
        assert f"jax_adapter_layers.py:{line} in __call__)" in message, message


SCALE = [1.0]


class ReadsAGlobal(RMSNorm):
    def __call__(self, X):
        return super().__call__(X) * SCALE[0]


def test_python_runs_on_every_call_and_no_stale_program_is_reused():
    layer = ADAPTER.construct(ReadsAGlobal, {"d": 8})
    x = np.random.default_rng(0).normal(size=(2, 8)).astype(np.float32)
    try:
        SCALE[0] = 1.0
        first = ADAPTER.vjp(layer, layer, [x], [0], np.ones((2, 8)))
        SCALE[0] = 3.0
        third = ADAPTER.vjp(layer, layer, [x], [0], np.ones((2, 8)))
        (once, (g_once,)), (thrice, (g_thrice,)) = (first.output, first.inputs), (third.output, third.inputs)
        called = ADAPTER.numpy(ADAPTER.call(layer, [x]))
    finally:
        SCALE[0] = 1.0
    np.testing.assert_allclose(ADAPTER.numpy(thrice), 3 * ADAPTER.numpy(once), rtol=1e-6)
    np.testing.assert_allclose(ADAPTER.numpy(g_thrice), 3 * ADAPTER.numpy(g_once), rtol=1e-5, atol=1e-6)
    # the plain call saw SCALE = 3 too (the forward and the VJP are different programs: last bits may differ)
    np.testing.assert_allclose(called, ADAPTER.numpy(thrice), rtol=1e-6)


def test_a_call_that_writes_state_writes_the_layer():
    layer = ADAPTER.construct(L.RMSNormWithRngs, {"d": 8, "eps": 1e-6})
    x = np.ones((4, 8), np.float32)
    first = ADAPTER.numpy(ADAPTER.call(layer, [x], training=True))
    second = ADAPTER.numpy(ADAPTER.call(layer, [x], training=True))
    assert not np.array_equal(first, second)  # the dropout RNG advanced on the layer itself
    assert np.array_equal(ADAPTER.numpy(ADAPTER.call(layer, [x])), ADAPTER.numpy(ADAPTER.call(layer, [x])))


def test_identical_calls_share_one_compiled_program():
    from layer_conformance.layerside.jax import core as jax_adapter
    x = np.random.default_rng(0).normal(size=(7, 8)).astype(np.float32)  # a shape no other test uses
    before = len(jax_adapter._COMPILED)
    first = ADAPTER.call(ADAPTER.construct(RMSNorm, {"d": 8}), [x])
    assert len(jax_adapter._COMPILED) == before + 1
    second = ADAPTER.call(ADAPTER.construct(RMSNorm, {"d": 8}), [x])  # a new layer, the same program
    assert len(jax_adapter._COMPILED) == before + 1
    assert np.array_equal(ADAPTER.numpy(first), ADAPTER.numpy(second))
