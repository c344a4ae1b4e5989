"""The zoo: correct layers as people write them, and correct third-party code, must pass every check.

A correct layer that fails is a harness bug until proven otherwise. tests/zoo/ holds our own
layers that compute at a fixed precision (upcast to float32 inside forward, compute in float32 and
return the input's dtype, autocast switched off) and bindings of third-party implementations
(tests/zoo/bindings.yaml, pinned in pyproject.toml's `test` extra).
"""
import json

import numpy as np
import pytest

from layer_conformance.frameworks import FRAMEWORKS, installed
from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.runner import check_all, context_for, run_check
from layer_conformance.targets import bundled_impl
from tests.support import MXNET_PYTHON, ROOT, pytest_run

FIXED_PRECISION = [  # (framework, impl, state_map): each computes its RMSNorm in float32
    ("torch", "tests.zoo.torch_layers:RMSNormUpcast", {"gain": "weight"}),
    ("torch", "tests.zoo.torch_layers:RMSNormFloat32", {}),
    ("torch", "tests.zoo.torch_layers:RMSNormAutocast", {}),
    ("tensorflow", "tests.zoo.tensorflow_layers:RMSNormUpcast", {"gain": "scale"}),
    ("tensorflow", "tests.zoo.tensorflow_layers:RMSNormFloat32", {}),
    ("jax", "tests.zoo.jax_layers:RMSNormUpcast", {"gain": "weight"}),
    ("jax", "tests.zoo.jax_layers:RMSNormFloat32", {}),
    ("mxnet", "tests.zoo.mxnet_layers:RMSNormFloat32", {}),
]
FIXED_PRECISION = [z for z in FIXED_PRECISION if installed(z[0])]


def _contract(name):
    return load_contract(bundled_contracts()[name])


def _all_pass(records):
    bad = {k: r for k, r in records.items() if r["outcome"] not in ("passed", "skipped")}
    assert not bad, bad
    for k, r in records.items():  # a skip says why (n/a, no second device), never an unfinished adapter
        if r["outcome"] == "skipped":
            assert r["message"] and "does not implement" not in r["message"], (k, r)


@pytest.mark.full   # every check of every zoo layer: about 2 minutes on a loaded 2-core machine
@pytest.mark.parametrize("framework,impl,state_map", FIXED_PRECISION, ids=[f"{f}-{i.rpartition(':')[2]}"
                                                                           for f, i, _ in FIXED_PRECISION])
def test_fixed_precision_rmsnorm_passes_every_check(sessions, framework, impl, state_map):
    records = check_all(_contract("rmsnorm"), impl, framework, state_map=state_map, session=sessions(framework))
    _all_pass(records)
    grads = records["gradients"]
    assert grads["outcome"] == "passed"
    # the finite difference ran, at the precision the layer was measured to compute at
    notes = grads["details"]["notes"]
    assert len(notes) == len(_contract("rmsnorm").cases), notes
    assert all("finite differences at the layer's measured precision: it computes at ~" in n for n in notes), notes


torch_only = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")


@torch_only
def test_a_layer_that_answers_float64_in_float32_passes_and_says_why_no_finite_difference(sessions):
    records = check_all(_contract("rmsnorm"), "tests.zoo.torch_layers:RMSNormReturnsFloat32", "torch",
                        session=sessions("torch"))
    _all_pass(records)
    notes = records["gradients"]["details"]["notes"]
    assert notes and all("finite differences skipped: the layer given float64 inputs and state returns float32"
                         in n for n in notes), notes


def _fd(session, name):
    """The finite-difference comparison alone on rmsnorm's first case, for a gain-free layer: the no-argument
    factory ``tests.zoo.torch_finite_difference:NAME``, built in its layer executor."""
    from layer_conformance.checks.common import reference_forward as _reference_forward
    from layer_conformance.checks.numerics import _finite_difference
    c = _contract("rmsnorm")
    ctx = context_for(c, f"tests.zoo.torch_finite_difference:{name}", "torch", session=session)
    x = ctx.first_inputs()
    ones = {"gain": np.ones(8)}
    expected = _reference_forward(ctx, x, ones)
    rng = np.random.default_rng(0)
    cot = rng.standard_normal(expected.shape)
    return _finite_difference(ctx, ctx.adapter.construct(ctx.impl, {}), x, [0], cot, rng, expected)


@torch_only
@pytest.mark.parametrize("scale,name", [(1.0, "GradScaled1"), (1.003, "GradScaled1003"), (0.99, "GradScaled099")])
def test_the_finite_difference_at_float32_precision_still_tells_a_wrong_backward(sessions, scale, name):
    problems, note = _fd(sessions("torch"), name)
    assert "measured precision" in note
    if scale == 1.0:
        assert problems == []
    else:  # 0.3 % off is far below what a float32 forward can hide from a step chosen for it
        assert problems and "directional derivative from the VJP" in problems[0], problems


@torch_only
def test_a_custom_function_written_for_torch_func_passes_and_batching_runs_its_gradients(sessions):
    """With setup_context and generate_vmap_rule torch.func can transform the Function: batching's grad of
    vmap and vmap of grad run (not n/a) and agree with the plain batch's per-example gradient."""
    records = check_all(_contract("scaled_tanh"), "tests.zoo.torch_layers:ScaledTanhFunc", "torch",
                        session=sessions("torch"))
    _all_pass(records)
    said = records["batching"]["details"]["vectorised"]
    assert said == "outputs agree; grad of vmap agrees; vmap of grad agrees", said


@torch_only
def test_no_finite_difference_where_the_layer_computes_coarser_than_float32(sessions):
    problems, why = _fd(sessions("torch"), "BFloat16")
    assert problems is None
    assert "computes at a coarse fixed precision where no finite-difference step is meaningful" in why


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if installed(f)])
def test_strict_loading_runs_without_optional_state_and_records_both_refusals(sessions, framework):
    c = _contract("rmsnorm")
    rec = run_check(context_for(c, bundled_impl(framework, "rmsnorm"), framework, session=sessions(framework)),
                    "strict_loading")
    assert rec["outcome"] == "passed", rec
    assert len(rec["details"]["unexpected_slot_errors"]) == 1
    assert len(rec["details"]["missing_slot_errors"]) == 1
    assert "unexpected_slot" in rec["details"]["unexpected_slot_errors"][0] or framework == "tensorflow"


@torch_only
def test_torch_group_norm_kernel_is_caught_on_channels_last_and_in_bfloat16(sessions):
    """transformers' Emu3VQVAEGroupNorm is torch's own F.group_norm: correct on contiguous float32 inputs (the
    native comparison passes), but its CPU kernel for channels-last inputs is 4.5e-4 off on the example at mean 30,
    as off as a one-pass variance E[x^2] - E[x]^2 (5.7e-4; two passes in float32: 6e-6), and its bfloat16 backward
    gives the gain's gradient there as 0.15 where it is 0.50 (torch 2.13 on CPU). Real findings, so groupnorm has no
    zoo binding."""
    c, impl = _contract("groupnorm"), "tests.zoo.third_party_torch:emu3_groupnorm"
    layout = run_check(context_for(c, impl, "torch", state_map={"gain": "weight"}, session=sessions("torch")), "layout")
    assert layout["outcome"] == "failed", layout
    assert "case 'edge_examples', channels_last inputs" in layout["message"], layout["message"]
    grads = run_check(context_for(c, impl, "torch", state_map={"gain": "weight"}, session=sessions("torch"),
                                  dtype="bfloat16"), "gradients")
    assert grads["outcome"] == "failed", grads
    assert "gradient for slot 'gain' (case 'edge_examples')" in grads["message"], grads["message"]


@torch_only
def test_llama_rotary_cast_to_float16_rounds_its_inv_freq(sessions):
    """transformers' LlamaRotaryEmbedding holds inv_freq in a floating buffer and upcasts it to float32 in forward:
    cast with .to(torch.float16) (model.half()), the module rounds the buffer itself to float16 (2^-11 relatively)
    and the position multiplies that rounding: rotary's long_sequence is 8.9e-3 off at position 54, where the same
    code with a float32 inv_freq is 1.8e-3 off (the contract's float16 atol is 3.9e-3; transformers 5.24, torch 2.13
    on CPU). In bfloat16 it passes: 2.6e-2 against the 3.1e-2 that products rounded to bfloat16 need. A real
    finding, so the rotary binding leaves float16 out."""
    c, impl = _contract("rotary"), "tests.zoo.third_party_torch:LlamaRotary"
    rec = run_check(context_for(c, impl, "torch", session=sessions("torch"), dtype="float16"), "values")
    assert rec["outcome"] == "failed", rec
    assert "case 'long_sequence': mismatched elements" in rec["message"], rec["message"]
    assert "case 'random'" not in rec["message"], rec["message"]  # 8 positions: too few to multiply it past atol


# --- third-party implementations ------------------------------------------------------------------

THIRD_PARTY = ROOT / "tests" / "zoo" / "bindings.yaml"


def test_third_party_bindings_pass_every_check(tmp_path):
    """Run as a user would: pytest --bindings, in a fresh process; every check passes or is n/a. The bundled
    rmsnorm reference of every framework runs beside them, and no exception may come from the harness's own code
    while it judges these correct layers (a check fails only for what it checks): the executors write each one
    they answer with to the file HARNESS_ERRORS_ENV names."""
    pytest.importorskip("transformers")
    pytest.importorskip("optax")
    import yaml
    from layer_conformance.errors import HARNESS_ERRORS_ENV
    bindings = yaml.safe_load(THIRD_PARTY.read_text())
    missing = sorted({b["framework"] for b in bindings if not installed(b["framework"])})
    if missing:
        pytest.skip(f"frameworks not installed here: {missing}")
    with_mxnet = MXNET_PYTHON.exists()
    # the bundled Keras layer builds from its input and takes no d: bound as a user binds it, it drops d
    bindings += [{"contract": "rmsnorm", "impl": bundled_impl(fw, "rmsnorm"), "framework": fw,
                  **({"arg_map": {"d": None}} if fw == "tensorflow" else {})}
                 for fw in FRAMEWORKS if installed(fw) or (fw == "mxnet" and with_mxnet)]
    every = tmp_path / "bindings.yaml"
    every.write_text(yaml.safe_dump(bindings))
    out, harness_errors = tmp_path / "zoo.json", tmp_path / "harness-errors.txt"
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", HARNESS_ERRORS_ENV: str(harness_errors)}
    proc = pytest_run("-q", "-p", "no:randomly", "--bindings", str(every), "--conformance-json", str(out),
                      *(["--executor-python", f"mxnet={MXNET_PYTHON}"] if with_mxnet else []),
                      cwd=ROOT, env=env, timeout=900)
    said = harness_errors.read_text() if harness_errors.exists() else ""
    assert not said, f"the harness raised while judging correct layers:\n{said}"
    assert out.exists(), proc.stdout[-4000:] + proc.stderr[-2000:]
    results = json.loads(out.read_text())["results"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    seen = {(r["impl"], r["framework"]) for r in results}
    assert len(seen) == len(bindings), seen
    bad = [r for r in results if r["outcome"] not in ("passed", "skipped")
           or (r["outcome"] == "skipped" and "does not implement" in r["message"])]
    assert not bad, bad
    for impl, _ in seen:  # every binding really ran: it passed some check
        assert any(r["outcome"] == "passed" for r in results if r["impl"] == impl), impl


def test_the_harness_error_instrument_names_harness_code_and_not_the_layer(tmp_path, monkeypatch):
    """What the zoo run's instrument writes: an exception from inside the harness (here the attribute walker
    handed no predicate), never one the code under test raised."""
    from layer_conformance.layerside.common import walk_attributes
    from layer_conformance.errors import HARNESS_ERRORS_ENV, note_harness_error
    said = tmp_path / "harness-errors.txt"
    monkeypatch.setenv(HARNESS_ERRORS_ENV, str(said))
    with pytest.raises(TypeError) as harness_raised:
        walk_attributes(object(), None, None, None)
    note_harness_error(harness_raised.value)

    def layer():
        raise ValueError("the layer's own mistake")
    with pytest.raises(ValueError) as layer_raised:
        layer()
    note_harness_error(layer_raised.value)
    lines = said.read_text().splitlines()
    assert len(lines) == 1 and "common.py" in lines[0] and "in visit)" in lines[0], lines
