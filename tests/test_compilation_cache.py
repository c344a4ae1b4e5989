"""A target's compilation cache: one directory per target, made by the judge and given to that target's
layer executor and fresh processes only, so that a fresh process does not compile again what the
layer's process compiled, and no target reads what another target's code wrote."""
import os

import numpy as np
import pytest

pytest.importorskip("jax")

SOFTPLUS = "layer_conformance.reference_impls.jax.log1pexp:log1pexp"
CLIPPED = "layer_conformance.reference_impls.jax.clipped_relu_grad:clipped_relu"


def _cache_of(adapter):
    return adapter.save_globals()["compilation cache"]


def _entries(directory):
    return sorted(os.listdir(directory))


def test_a_fresh_process_reads_the_compilations_of_its_target_only(session):
    adapter = session.adapter("jax")
    x = np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)
    impl, _ = session.load("jax", SOFTPLUS)
    first = session.compiled_in[("jax", SOFTPLUS)]
    assert _cache_of(adapter) == first
    want = adapter.numpy(adapter.call(impl, [x]))
    written = _entries(first)
    assert written  # the layer's process kept what it compiled
    with session.fresh_adapter("jax") as fresh:
        assert _cache_of(fresh) == first  # the fresh process of the same target reads it
        same = fresh._executor.request("import_object", path=SOFTPLUS.replace(":", "."))
        assert np.array_equal(fresh.numpy(fresh.call(same, [x])), want)
    assert _entries(first) == written  # the identical program was read, not compiled and written again

    session.load("jax", CLIPPED)  # another target in the same (clean) executor: its own directory
    second = session.compiled_in[("jax", CLIPPED)]
    assert second != first and _cache_of(adapter) == second
    with session.fresh_adapter("jax") as fresh:
        assert _cache_of(fresh) == second
    session.load("jax", SOFTPLUS)  # back to the first target: back to its directory
    assert _cache_of(adapter) == first

    root = os.path.dirname(first)
    session.close()
    assert not os.path.exists(root)  # the run's caches go with the run


def test_a_layer_that_moves_the_cache_is_put_back():
    import jax

    from layer_conformance.layerside.jax import FrameworkAdapter
    adapter = FrameworkAdapter()
    before = jax.config.jax_compilation_cache_dir
    saved = adapter.save_globals()
    jax.config.update("jax_compilation_cache_dir", "/somewhere/shared")
    try:
        assert adapter.restore_globals(saved) == ["jax compilation cache"]
        assert jax.config.jax_compilation_cache_dir == before
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
