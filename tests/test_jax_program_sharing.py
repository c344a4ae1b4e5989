"""JAX's adapter shares one compiled program among the calls that lower to it (issue 47): the state stays an
argument of the program, and where the arguments are placed does not split one program into two."""
import numpy as np
import pytest

pytest.importorskip("flax")

from layer_conformance.layerside import get_adapter  # noqa: E402

ADAPTER = get_adapter("jax")  # before any JAX operation: asks for the second host device
from layer_conformance.layerside.jax import core  # noqa: E402
from layer_conformance.reference_impls.jax.rmsnorm import RMSNorm  # noqa: E402


def _x(rows):
    # a row count no other test uses: the programs counted here are this test's own
    return np.random.default_rng(rows).normal(size=(rows, 8)).astype(np.float32)


def test_state_set_between_calls_is_seen_through_the_shared_program():
    layer, x = ADAPTER.construct(RMSNorm, {"d": 8}), _x(11)
    before = len(core._COMPILED)
    ADAPTER.assign(layer, "gain", np.ones(8, np.float32))
    once = ADAPTER.numpy(ADAPTER.call(layer, [x]))
    ADAPTER.assign(layer, "gain", np.full(8, 3.0, np.float32))
    thrice = ADAPTER.numpy(ADAPTER.call(layer, [x]))
    assert len(core._COMPILED) == before + 1  # one program: the state is its argument, not a constant
    np.testing.assert_allclose(thrice, 3 * once, rtol=1e-6)


def test_placement_of_the_state_does_not_compile_the_program_again():
    x = ADAPTER.tensor(_x(13))  # committed to the default device
    loose = ADAPTER.construct(RMSNorm, {"d": 8})
    placed = ADAPTER.move(ADAPTER.construct(RMSNorm, {"d": 8}), ADAPTER.cpu_device)
    assert not loose.gain[...].committed and placed.gain[...].committed  # what the test is about
    before = len(core._COMPILED)
    a, b = ADAPTER.call(loose, [x]), ADAPTER.call(placed, [x])
    assert len(core._COMPILED) == before + 1
    assert a.committed and b.committed and a.devices() == b.devices() == x.devices()  # as jit places them
    np.testing.assert_array_equal(ADAPTER.numpy(a), ADAPTER.numpy(b))


def test_the_compiled_check_still_traces_its_own_program():
    layer, x = ADAPTER.construct(RMSNorm, {"d": 8}), _x(17)
    ct = np.ones((17, 8), np.float32)
    shared = ADAPTER.vjp(layer, layer, [x], [0], ct)  # the adapter's program for the same computation
    compiled = ADAPTER.compile(layer, layer, "jax.jit")
    own = ADAPTER.compiled_vjp(compiled, layer, [x], [0], ct)
    assert ADAPTER.compile_stats(compiled).traces == 1
    ADAPTER.compiled_vjp(compiled, layer, [x], [0], 2 * ct)
    assert ADAPTER.compile_stats(compiled).traces == 1  # a new cotangent value is no retrace
    np.testing.assert_allclose(ADAPTER.numpy(own.inputs[0]), ADAPTER.numpy(shared.inputs[0]), rtol=1e-5, atol=1e-6)
