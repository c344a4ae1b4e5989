"""The ``compiled`` check through executors, as the plugin runs it: the bundled layers pass under
each framework's compiler, each compiled mutant fails with a message naming the mistake, a graph
break fails unless the contract allows it with a reason, and the torch backend option reaches it."""
import os

import pytest

from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.runner import context_for, run_check
from tests.support import ROOT, pytest_run


def _run(sessions, framework, contract, impl, backend=None):
    c = load_contract(bundled_contracts()[contract])
    ctx = context_for(c, impl, framework, session=sessions(framework))
    ctx.with_options(compile_backend=backend)
    return run_check(ctx, "compiled", timeout=300)


MUTANTS = [
    ("torch", "round_ste", "tests.mutants.torch_compiled:round_ste_annealed",
     "recompiled on a second call with identical inputs (guard failed"),
    ("tensorflow", "rmsnorm", "tests.mutants.tensorflow_compiled:RMSNormPythonBranch",
     "reads a tensor's value in Python"),
    ("jax", "rmsnorm", "tests.mutants.jax_compiled:RMSNormCallCounter", "the layer has a Python side effect"),
    # caught only because the first case's eager run is op by op (every other call the harness makes traces)
    ("jax", "rmsnorm", "tests.mutants.jax_compiled:RMSNormArrayPath", "takes another path when its inputs are traced"),
    ("mxnet", "rmsnorm", "tests.mutants.mxnet_compiled:RMSNormAsnumpy", "reads a tensor's value in Python"),
]


@pytest.mark.full   # a catalogue of compiled mutants
@pytest.mark.parametrize("framework,contract,impl,fragment", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_compiled_mutant_is_caught_through_an_executor(sessions, framework, contract, impl, fragment):
    rec = _run(sessions, framework, contract, impl)
    assert rec["outcome"] == "failed", rec
    assert fragment in rec["message"], rec["message"]


PASSING = [
    ("torch", "rmsnorm", "layer_conformance.reference_impls.torch.rmsnorm:IMPL", ["torch.compile(backend='aot_eager')"]),
    ("torch", "round_ste", "layer_conformance.reference_impls.torch.round_ste:IMPL", ["torch.compile(backend='aot_eager')"]),
    ("tensorflow", "rmsnorm", "layer_conformance.reference_impls.tensorflow.rmsnorm:IMPL",
     ["tf.function", "tf.function(jit_compile=True)"]),
    ("jax", "scaled", "layer_conformance.reference_impls.jax.scaled:IMPL", ["jax.jit"]),
    ("jax", "dropout", "layer_conformance.reference_impls.jax.dropout:IMPL", ["jax.jit"]),
    ("mxnet", "rmsnorm", "tests.mutants.mxnet_compiled:RMSNormHybrid", ["hybridize()"]),
]


@pytest.mark.parametrize("framework,contract,impl,compilers", PASSING, ids=[f"{p[0]}-{p[1]}" for p in PASSING])
def test_correct_layer_passes_and_compilation_is_proved(sessions, framework, contract, impl, compilers):
    rec = _run(sessions, framework, contract, impl)
    assert rec["outcome"] == "passed", rec
    for compiler in compilers:
        d = rec["details"][compiler]
        assert d["traces"] >= 1 and d["graphs"] >= 1, d   # something was compiled
        assert d["calls_compared"] >= 3, d
    # the compiler's own threads (torch's tqdm monitor) are not the layer's: no fresh process for the next target
    assert not any("thread" in note for note in rec["details"].get("global_state", [])), rec["details"]


def test_gluon_block_and_function_are_not_applicable_with_the_reason(sessions):
    block = _run(sessions, "mxnet", "rmsnorm", "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL")
    assert block["outcome"] == "skipped" and block.get("not_applicable"), block
    assert "not a HybridBlock" in block["message"]
    fn = _run(sessions, "mxnet", "round_ste", "layer_conformance.reference_impls.mxnet.round_ste:IMPL")
    assert fn["outcome"] == "skipped" and "cannot place it in a hybridized graph" in fn["message"], fn


def test_graph_break_fails_unless_the_contract_allows_it(sessions, tmp_path):
    c = load_contract(bundled_contracts()["safe_norm"])
    allowed = run_check(context_for(c, "layer_conformance.reference_impls.torch.safe_norm:IMPL", "torch", session=sessions("torch")),
                        "compiled", timeout=300)
    assert allowed["outcome"] == "passed", allowed
    assert allowed["details"]["torch.compile(backend='aot_eager')"]["graph_breaks"], allowed
    data = dict(c.data)
    data.pop("compiled")
    strict = type(c)(data=data, path=c.path, lines=c.lines)
    rec = run_check(context_for(strict, "layer_conformance.reference_impls.torch.safe_norm:IMPL", "torch", session=sessions("torch")),
                    "compiled", timeout=300)
    assert rec["outcome"] == "failed", rec
    assert "broke the graph" in rec["message"] and "custom jvp" in rec["message"], rec["message"]


def test_not_applicable_in_the_contract(sessions):
    c = load_contract(bundled_contracts()["rmsnorm"])
    na = type(c)(data={**c.data, "compiled": {"not_applicable": "compiled elsewhere"}}, path=c.path, lines=c.lines)
    rec = run_check(context_for(na, "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch", session=sessions("torch")),
                    "compiled")
    assert rec["outcome"] == "skipped" and rec["not_applicable"] and "compiled elsewhere" in rec["message"]


def test_compiled_keys_are_validated(tmp_path):
    from layer_conformance.contract import ContractError
    src = (ROOT / "specs" / "rmsnorm.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(src + "compiled: {max_recompiles: -1, allow_graph_breaks: ''}\n")
    with pytest.raises(ContractError):
        load_contract(bad)


def test_compile_backend_option_reaches_the_check(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "r.json"
    proc = pytest_run("-q", "--contract", "rmsnorm", "--impl", "layer_conformance.reference_impls.torch.rmsnorm:IMPL",
                      "--check", "compiled", "--compile-backend", "eager", "--conformance-json", str(out),
                      "--rootdir", str(ROOT), cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import json
    (rec,) = json.loads(out.read_text())["results"]
    assert "torch.compile(backend='eager')" in rec["details"], rec


def test_torch_compile_leaves_the_executor_clean_for_the_next_target(sessions):
    """torch.compile patches torch.jit.trace, fx and the fused optimizers on its first use in a process: the
    executor settles that before its fingerprint, so a correct layer's compiled check does not cost the next
    target a fresh process (a framework import)."""
    _run(sessions, "torch", "sign_ste", "layer_conformance.reference_impls.torch.sign_ste:IMPL")
    assert sessions("torch").layer["torch"].request("health") == []


@pytest.mark.parametrize("framework,compiler,sizes", [
    ("tensorflow", "tf.function", "one new batch size"),   # traces anew for every shape by design: one size shows it
    ("jax", "jax.jit", "one new batch size"),
    ("torch", "torch.compile(backend='aot_eager')", "2 new batch sizes"),  # automatic dynamic: the second is reused
])
def test_new_batch_sizes_are_tried_and_their_recompiles_counted_against_the_limit(sessions, framework, compiler, sizes):
    c = load_contract(bundled_contracts()["scaled_tanh"])
    impl = f"layer_conformance.reference_impls.{framework}.scaled_tanh:IMPL"
    rec = run_check(context_for(c, impl, framework, session=sessions(framework)), "compiled", timeout=300)
    assert rec["outcome"] == "passed", rec
    recompiles = rec["details"][f"{compiler}: recompiles for {sizes}"]
    assert recompiles >= 1, rec["details"]  # the new sizes ran under the compiler
    # the same layer, allowed fewer recompiles than it makes, fails and says how many
    strict = type(c)(data={**c.data, "compiled": {"max_recompiles": recompiles - 1}}, path=c.path, lines=c.lines)
    rec = run_check(context_for(strict, impl, framework, session=sessions(framework)), "compiled", timeout=300)
    assert rec["outcome"] == "failed", rec
    assert f"{compiler} recompiled {recompiles} times for {sizes}, more than the {recompiles - 1} allowed" \
        in rec["message"], rec["message"]


def test_a_gap_in_finiteness_under_the_compiler_gets_no_hint():
    """NaN under the compiler where eager execution is finite is a degenerate formula the compiler rewrote (eps
    outside the sqrt, under XLA), not Python state frozen at trace time: no hint names a cause; a finite gap does."""
    import numpy as np
    from layer_conformance.checks.compiled import _diagnose
    want = np.ones((2, 3), np.float32)
    got = want.copy()
    got[0, 0] = np.nan
    assert _diagnose("xla", "gradient for input 'X'", got, want, None) == ""
    assert "froze" in _diagnose("xla", "gradient for input 'X'", want * 2, want, None)


def test_xla_generates_code_unoptimized_unless_xla_flags_set_the_level(monkeypatch):
    """The XLA compiler's cheap setting (LLVM -O0, the whole HLO pipeline) leaves a user's own level alone."""
    pytest.importorskip("tensorflow")
    from layer_conformance.layerside.tensorflow import compile as tf_adapter
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_thunk_runtime=true")
    tf_adapter._xla_backend_unoptimized()
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_use_thunk_runtime=true --xla_backend_optimization_level=0"
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    tf_adapter._xla_backend_unoptimized()
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=3"


def test_a_keras_layer_without_get_config_passes_compiled_and_fails_only_export(sessions):
    """Nothing under tf.function needs the layer's config: a correct Keras layer whose constructor takes an
    object (so Keras writes no get_config() for it) passes ``compiled`` and the other checks that build it
    from its constructor; only ``export``, whose .keras file stores get_config(), fails, with its hint."""
    pytest.importorskip("tensorflow")
    impl = "tests.mutants.tensorflow_export:rmsnorm_initializer_object"
    c = load_contract(bundled_contracts()["rmsnorm"])
    ctx = context_for(c, impl, "tensorflow", session=sessions("tensorflow"))
    for check in ("compiled", "serialization", "strict_loading"):
        rec = run_check(ctx, check, timeout=300)
        assert rec["outcome"] == "passed", (check, rec)
    rec = run_check(ctx, "export", timeout=300)
    assert rec["outcome"] == "failed", rec
    assert "Keras writes one automatically only when every argument is a plain value" in rec["message"], rec
    # nor does a dtype of the contract's: the twin in float64 is made as the layer was, not from its config
    ctx64 = context_for(c, impl, "tensorflow", session=sessions("tensorflow"), dtype="float64")
    rec = run_check(ctx64, "values", timeout=300)
    assert rec["outcome"] == "passed", rec


def test_a_compiled_value_a_few_ulps_off_is_rounding_and_names_no_python_cause():
    # XLA's other order of a float32 sum (swiglu's scale10 weight gradients: 2e-5 relative) is not "Python state
    # frozen at trace time": no hint; a real difference still gets one
    import numpy as np
    from layer_conformance.checks.compiled import _diagnose
    want = np.linspace(-30.0, 30.0, 64, dtype=np.float32)
    ulps_off = want + np.float32(8 * np.finfo(np.float32).eps * 30.0)
    assert _diagnose("torch.compile", "the output", ulps_off, want, want.copy()) == ""
    assert "froze at trace time" in _diagnose("torch.compile", "the output", want * 1.01, want, want.copy())
