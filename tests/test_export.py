"""The export check through executors: saved in the framework's formats, loaded in a fresh process."""
import copy
import importlib.util
import os
import time

import pytest

from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.boundary import Session
from layer_conformance.runner import context_for, run_check


def _has(module):
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def session():
    s = Session({"mxnet": None})
    yield s
    s.close()


def _export(session, contract, spec, framework):
    c = contract if not isinstance(contract, str) else load_contract(bundled_contracts()[contract])
    return run_check(context_for(c, spec, framework, session=session), "export")


def _with(contract: str, **data):
    c = copy.copy(load_contract(bundled_contracts()[contract]))
    c.data = {**c.data, **data}
    return c


@pytest.mark.skipif(not _has("torch"), reason="torch not installed")
class TestTorch:
    def test_every_format_bit_equal_in_a_fresh_process(self, session):
        rec = _export(session, "rmsnorm", "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch")
        assert rec["outcome"] == "passed", rec
        assert rec["details"]["formats"] == {"torch.export": "passed", "torch.save": "passed", "state_dict": "passed"}

    def test_custom_function_under_torch_export_is_recorded_not_guessed(self, session):
        rec = _export(session, "round_ste", "layer_conformance.reference_impls.torch.round_ste:IMPL", "torch")
        assert rec["outcome"] == "passed", rec
        fmt = rec["details"]["formats"]["torch.export"]
        # measured: the exported program differentiates round itself (zero), not the straight-through rule
        assert fmt.startswith("passed (values); gradients skipped:"), fmt
        assert "RoundSTE" in fmt and "keeps no backward" in fmt and "measured" in fmt

    def test_unpicklable_attribute_is_named(self, session):
        rec = _export(session, "rmsnorm", "tests.mutants.torch_export:LambdaAttribute", "torch")
        assert rec["outcome"] == "failed"
        assert "saving as torch.save failed" in rec["message"] and "lambda" in rec["message"]
        assert rec["details"]["formats"]["state_dict"] == "passed"

    def test_the_contract_limits_and_excuses_formats(self, session):
        rec = _export(session, _with("rmsnorm", export={"formats": ["state_dict", "keras"]}),
                      "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch")
        assert rec["outcome"] == "passed" and list(rec["details"]["formats"]) == ["state_dict"], rec
        rec = _export(session, _with("rmsnorm", export={"formats": ["keras"]}),
                      "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch")
        assert rec["outcome"] == "skipped" and rec.get("not_applicable"), rec
        rec = _export(session, _with("rmsnorm", export={"not_applicable": "served from a C++ runtime"}),
                      "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch")
        assert rec["outcome"] == "skipped" and rec["message"] == "served from a C++ runtime"

    def test_the_fresh_process_is_new_and_has_not_imported_the_layer(self, session):
        ctx = context_for(load_contract(bundled_contracts()["rmsnorm"]), "tests.mutants.torch_export:LambdaAttribute",
                          "torch", session=session)
        with ctx.fresh_adapter() as fresh:
            assert fresh._executor.pid != ctx.adapter._executor.pid
            imported = fresh._executor.request("reference", module="builtins", function="eval",
                                               args=["'tests.mutants.torch_export' in __import__('sys').modules"])
            assert imported is False  # the layer's module is imported there only by a format that needs it
            assert ctx.impl_spec == "tests.mutants.torch_export:LambdaAttribute"
        assert not fresh._executor.alive  # closed after use


    def test_a_save_that_hangs_ends_the_check_and_its_fresh_process(self, session):
        # the fresh process loads the formats saved so far on a thread while this one saves the next: the
        # timeout must end both, and no result may come from the thread after it
        ctx = context_for(load_contract(bundled_contracts()["rmsnorm"]),
                          "tests.hostile.torch_hostile:HangsWhenPickled", "torch", session=session)
        rec = run_check(ctx, "export", timeout=8)
        assert rec["outcome"] == "error" and "timed out" in rec["message"], rec
        assert "torch_hostile.py" in rec["message"] and "in __reduce_ex__)" in rec["message"], rec  # where it
        # hung, from the process's own stacks; not the judge's wait
        assert session.running == []
        zygote, ended = session.zygotes["torch"].pid, time.monotonic() + 10
        kept = {e.pid for e in (*session.layer.values(), *session.native.values())}  # forked from it too
        while time.monotonic() < ended:  # killed: a zombie in a moment, until the zygote's next fork reaps it
            forked = [p for pid in os.listdir("/proc") if (p := _stat(pid)) and p[1] == zygote
                      and int(pid) not in kept]
            if all(state == "Z" for state, _ in forked):
                break
            time.sleep(0.1)
        assert all(state == "Z" for state, _ in forked), forked  # the fresh process went with the check


def _stat(pid: str):
    """(state, parent pid) of a process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


@pytest.mark.skipif(not _has("tensorflow"), reason="tensorflow not installed")
class TestKeras:
    @pytest.mark.full   # both Keras formats saved and loaded in a fresh process: about 20 s
    def test_keras_file_and_savedmodel(self, session):
        rec = _export(session, "rmsnorm", "layer_conformance.reference_impls.tensorflow.rmsnorm:IMPL", "tensorflow")
        assert rec["outcome"] == "passed", rec
        formats = rec["details"]["formats"]
        assert formats["keras"] == "passed" and list(formats) == ["keras", "savedmodel"], formats
        # bit-equal to the graph the SavedModel holds, run in the original process; eager may differ
        assert formats["savedmodel"] == "passed" or formats["savedmodel"].startswith(
            "passed (bit-equal to the traced tf.function"), formats

    def test_custom_gradient_survives_savedmodel_and_the_option_is_recorded(self, session):
        rec = _export(session, "log1pexp", "layer_conformance.reference_impls.tensorflow.log1pexp:IMPL", "tensorflow")
        assert rec["outcome"] == "passed", rec
        assert "without experimental_custom_gradients" in rec["details"]["formats"]["savedmodel"]

    def test_a_complex_output_s_gap_to_eager_execution_is_a_modulus(self, session):
        # fourier_half's output is complex: the gap once cast it to real first (and said 7.19, its imaginary part)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error", __import__("numpy").exceptions.ComplexWarning)
            rec = _export(session, "fourier_half", "layer_conformance.reference_impls.tensorflow.fourier_half:IMPL", "tensorflow")
        assert rec["outcome"] == "passed", rec
        said = rec["details"]["formats"]["savedmodel"]
        gap = float(said.split("differs by up to ")[1].rstrip(")")) if "differs by up to" in said else 0.0
        assert gap < 1e-3, said

    @pytest.mark.parametrize("impl,fragment", [
        ("NoKwargs", "__init__ must accept **kwargs"),
        ("ConfigWithoutArguments", "get_config() must return every constructor argument"),
    ])
    def test_classic_keras_mistakes_are_named(self, session, impl, fragment):
        rec = _export(session, "rmsnorm", f"tests.mutants.tensorflow_export:{impl}", "tensorflow")
        assert rec["outcome"] == "failed", rec
        assert "keras: loading in a fresh process failed" in rec["message"] and fragment in rec["message"]
        assert rec["details"]["formats"]["savedmodel"].startswith("passed")  # a graph needs no config


@pytest.mark.skipif(not _has("flax"), reason="jax/flax not installed")
class TestJax:
    def test_custom_vjp_survives_jax_export(self, session):
        rec = _export(session, "log1pexp", "layer_conformance.reference_impls.jax.log1pexp:IMPL", "jax")
        assert rec["outcome"] == "passed", rec
        assert rec["details"]["formats"] == {"jax.export": "passed"}

    def test_layer_formats(self, session):
        rec = _export(session, "rmsnorm", "layer_conformance.reference_impls.jax.rmsnorm:IMPL", "jax")
        assert rec["outcome"] == "passed", rec
        assert rec["details"]["formats"] == {"jax.export": "passed", "nnx": "passed"}

    def test_host_callback_is_named(self, session):
        rec = _export(session, "log1pexp", "tests.mutants.jax_export:log1pexp_numpy_backward", "jax")
        assert rec["outcome"] == "failed" and "jax.pure_callback" in rec["message"], rec


@pytest.mark.skipif(not _has("mxnet"), reason="mxnet not installed (its own environment)")
class TestGluon:
    def test_hybrid_block_round_trips_through_symbolblock(self, session):
        rec = _export(session, "rmsnorm", "tests.export_impls.mxnet_hybrid:HybridRMSNorm", "mxnet")
        assert rec["outcome"] == "passed", rec
        assert rec["details"]["formats"] == {"gluon.export": "passed"}

    def test_a_block_and_a_function_are_not_applicable_with_the_reason(self, session):
        rec = _export(session, "rmsnorm", "layer_conformance.reference_impls.mxnet.rmsnorm:IMPL", "mxnet")
        assert rec["outcome"] == "skipped" and rec.get("not_applicable") and "HybridBlock" in rec["message"]
        rec = _export(session, "log1pexp", "layer_conformance.reference_impls.mxnet.log1pexp:IMPL", "mxnet")
        assert rec["outcome"] == "skipped" and "autograd.Function" in rec["message"]
