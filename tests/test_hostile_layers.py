"""A user layer cannot take the run down: it fails the checks it breaks, with a message that says how."""
import json
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from layer_conformance.contract import bundled_contracts, load_contract  # noqa: E402
from layer_conformance.runner import check_all, run_check, context_for  # noqa: E402
from tests.support import ROOT, pytest_run  # noqa: E402

RMSNORM = load_contract(bundled_contracts()["rmsnorm"])
HOSTILE = "tests.hostile.torch_hostile"
IMPL = "layer_conformance.reference_impls.torch.rmsnorm:IMPL"


@pytest.fixture
def torch_session(sessions):
    """The module's executors for torch: each hostile layer runs in a layer executor of its own, as in a run."""
    return sessions("torch")


def run(session, name, check, **kw):
    """One check of tests.hostile.torch_hostile's ``name`` (or of a ``module:attr``) in ``session``'s executors."""
    impl = name if ":" in name else f"{HOSTILE}:{name}"
    return run_check(context_for(RMSNORM, impl, "torch", session=session), check, **kw)


def _in_executor(session, framework, expr):
    """``expr`` evaluated in ``session``'s layer executor of ``framework``: the process the layer's checks ran in."""
    return session.layer[framework].request("reference", module="builtins", function="eval", args=[expr])


TORCH_GLOBALS = ("(str(__import__('torch').get_default_dtype()), __import__('torch').get_num_threads(), "
                 "__import__('torch').get_rng_state().numpy())")


def test_raising_layer_fails_with_the_point_of_failure(torch_session):
    # building the layer runs forward: `parameters` names the failure, the checks resting on it are blocked
    rec = run(torch_session, "Raises", "parameters")
    assert rec["outcome"] == "failed"
    assert "ValueError: boom from the user's forward" in rec["message"]
    assert "torch_hostile.py" in rec["message"] and "in forward" in rec["message"]
    blocked = run(torch_session, "Raises", "values")
    assert blocked["outcome"] == "blocked" and blocked["blocked_by"] == "parameters"
    assert "ValueError: boom from the user's forward" in blocked["details"]["symptom"]


def test_nan_outputs_are_counted_not_compared(torch_session):
    rec = run(torch_session, "ReturnsNaN", "values")
    assert rec["outcome"] == "failed"
    assert "are not finite where the reference is (3 NaN, 1 Inf)" in rec["message"]


def test_wrong_shape_and_dtype_are_named(torch_session):
    assert "output shape [16, 7], expected [16, 8]" in run(torch_session, "WrongShape", "values")["message"]
    assert "dtype float64, expected float32" in run(torch_session, "WrongDtype", "values")["message"]


def test_python_object_instead_of_tensor(torch_session):
    rec = run(torch_session, "ReturnsObject", "values")
    assert rec["outcome"] == "failed" and "is a dict, not a torch tensor" in rec["message"]


def test_hanging_layer_is_stopped_by_the_timeout(torch_session):
    # the judge kills the layer's executor at the deadline (the check runs nowhere it could be interrupted)
    rec = run(torch_session, "Hangs", "values", timeout=1.0)
    assert rec["outcome"] == "error"
    assert "timed out after 1 s" in rec["message"] and "per-check timeout" in rec["message"]
    assert not torch_session.layer["torch"].alive


def test_deadlocked_layer_is_stopped_by_the_timeout(torch_session):
    rec = run(torch_session, "Deadlocks", "values", timeout=1.0)
    assert rec["outcome"] == "error" and "timed out after 1 s" in rec["message"]
    assert not torch_session.layer["torch"].alive


def conformance_run(tmp_path, *args, hostile=None):
    """A real pytest run in a subprocess; with ``hostile``, a bindings file pairs that hostile layer with the
    correct one. Returns (process, {(impl attribute, check): record})."""
    if hostile:
        bindings = tmp_path / "bindings.yaml"
        bindings.write_text(textwrap.dedent(f"""\
            - {{contract: rmsnorm, impl: "tests.hostile.torch_hostile:{hostile}"}}
            - {{contract: rmsnorm, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL"}}
        """))
        args = ("--bindings", str(bindings), *args)
    out = tmp_path / "results.json"
    proc = pytest_run("-q", *args, "--conformance-json", str(out), "--rootdir", str(ROOT), cwd=ROOT, timeout=300)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, {(r["impl"].rpartition(":")[2], r["check"]): r for r in records}


def test_hang_in_native_code_loses_only_its_check(tmp_path):
    """Native code stuck with signals masked never returns to Python; the judge kills its executor from
    outside at the timeout and the rest of the run completes."""
    # the cases' own dtype alone (one record per check): each hang is a wait of its own
    proc, by = conformance_run(tmp_path, "-n", "1", "--check", "values", "--check-timeout", "1", "--dtype", "float32",
                               hostile="HangsInNativeCode")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    by = {impl: r for (impl, _), r in by.items()}
    assert by["HangsInNativeCode"]["outcome"] == "error"
    assert "timed out after 1 s" in by["HangsInNativeCode"]["message"]
    # where: from the executor's own stack dump, asked for before it is killed (the sleep is in C; the
    # frame that called it is the layer's)
    assert "torch_hostile.py" in by["HangsInNativeCode"]["message"], by["HangsInNativeCode"]["message"]
    assert "in forward)" in by["HangsInNativeCode"]["message"]
    assert by["IMPL"]["outcome"] == "passed"


def test_a_timeout_in_an_executor_names_the_place_only_where_the_process_says(torch_session):
    rec = run(torch_session, "Hangs", "values", timeout=2)
    assert rec["outcome"] == "error" and "torch_hostile.py" in rec["message"], rec
    assert "in forward)" in rec["message"], rec  # a Python loop: the loop's own line
    rec = run(torch_session, "HidesWhereItHangs", "values", timeout=2)
    assert rec["outcome"] == "error", rec
    assert rec["message"].endswith("the layer hung (its executor was killed from outside)"), rec  # no dump,
    # no place: never the judge's own wait


def test_global_state_mutation_is_restored_and_reported(torch_session):
    """The layer sets float64 as torch's default dtype, reseeds the RNG and changes the thread count in its
    executor: the snapshot around the check (Session.begin_check/end_check) puts all of it back in that process
    and the record says what it put back."""
    judge = (torch.get_default_dtype(), torch.get_num_threads())
    ctx = context_for(RMSNORM, f"{HOSTILE}:MutatesGlobals", "torch", session=torch_session)
    dtype, threads, rng = _in_executor(torch_session, "torch", TORCH_GLOBALS)
    assert dtype == "torch.float32"
    rec = run_check(ctx, "values")
    notes = " ".join(rec["details"]["global_state"])
    assert "the layer changed global state (restored): " in notes, rec
    assert "torch default dtype" in notes and "torch RNG state" in notes, notes
    assert ("torch threads" in notes) == (threads != 1), notes  # the layer sets 1: a change only from another
    dtype_after, threads_after, rng_after = _in_executor(torch_session, "torch", TORCH_GLOBALS)
    assert (dtype_after, threads_after) == (dtype, threads) and np.array_equal(rng_after, rng)
    assert (torch.get_default_dtype(), torch.get_num_threads()) == judge  # the judge's process was never touched
    # a second check in the same process starts from the restored state: the layer's changes are seen (and
    # undone) again
    again = run_check(ctx, "values")
    assert "torch default dtype" in " ".join(again["details"]["global_state"]), again
    # and it does not change the verdicts of a correct layer run after it
    after = check_all(RMSNORM, IMPL, "torch", session=torch_session)
    assert all(r["outcome"] in ("passed", "skipped") for r in after.values()), after


def test_correct_layer_passes_in_the_same_session_after_hostile_ones(torch_session):
    for name in ("Raises", "ReturnsNaN", "WrongShape", "ReturnsObject"):
        run(torch_session, name, "values")
    assert run(torch_session, IMPL, "values")["outcome"] == "passed"


def test_aborting_layer_loses_only_its_checks(tmp_path):
    """os.abort() in forward kills the executor; the lost checks are 'error', the correct layer in the
    same run passes, and the results file is complete."""
    proc, by = conformance_run(tmp_path, "-n", "1", "--check", "values", "--check", "parameters", "--dtype", "float32",
                               hostile="Aborts")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert by[("Aborts", "values")]["outcome"] == "error"
    assert "killed by SIGABRT" in by[("Aborts", "values")]["message"]
    # building the layer calls forward once, so the parameters check dies with it too
    assert by[("Aborts", "parameters")]["outcome"] == "error"
    assert by[("IMPL", "values")]["outcome"] == "passed"
    assert by[("IMPL", "parameters")]["outcome"] == "passed"


def test_memory_exhaustion_is_an_error_under_the_limit(tmp_path):
    """Under --memory-limit the allocation fails inside the layer: 'error', and the run goes on."""
    proc, by = conformance_run(tmp_path, "--memory-limit", "6", "--contract", "rmsnorm",
                               "--impl", "tests.hostile.torch_hostile:ExhaustsMemory", "--check", "values")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (rec,) = by.values()
    assert rec["outcome"] == "error"
    assert "exhausted the memory limit" in rec["message"] and "can't allocate memory" in rec["message"]


def test_jax_x64_switch_is_undone_and_reported(sessions):
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    session = sessions("jax")
    judge = jax.config.jax_enable_x64
    ctx = context_for(RMSNORM, "tests.hostile.jax_hostile:EnablesX64", "jax", session=session)
    x64 = "__import__('jax').config.jax_enable_x64"
    before = _in_executor(session, "jax", x64)
    assert before is False
    rec = run_check(ctx, "values")
    assert _in_executor(session, "jax", x64) == before  # put back in the process the layer switched it in
    assert "the layer changed global state (restored): " in " ".join(rec["details"]["global_state"]), rec
    assert "jax x64" in " ".join(rec["details"]["global_state"])
    assert jax.config.jax_enable_x64 == judge
    jax_impl = "layer_conformance.reference_impls.jax.rmsnorm:IMPL"
    assert run_check(context_for(RMSNORM, jax_impl, "jax", session=session), "values")["outcome"] == "passed"


def _core_pattern() -> str:
    try:
        with open("/proc/sys/kernel/core_pattern") as f:
            return f.read().strip()
    except OSError:
        return ""


@pytest.mark.skipif(not _core_pattern() or _core_pattern().startswith("|") or "/" in _core_pattern(),
                    reason="core files here go to a handler or a fixed directory, not the crashing process's cwd")
def test_a_crashing_layer_leaves_no_core_file_in_the_users_directory(tmp_path):
    """A user whose shell allows core files (ulimit -c unlimited): the layer's os.abort() ends its executor, and
    no core file of it (a framework's whole memory, hundreds of MB) is written where the run started. Without the
    sandbox, which would keep the directory from the layer anyway: a machine without one runs so by default."""
    import os
    import subprocess
    from tests.support import pytest_command

    out = tmp_path / "results.json"
    command = pytest_command("-q", "-n", "0", "--contract", "rmsnorm", "--impl", f"{HOSTILE}:Aborts", "--check",
                             "values", "--dtype", "float32", "--sandbox", "off", "--conformance-json", str(out))
    # the shell raises the limit and becomes the run (a preexec_fn would fork this multithreaded process)
    proc = subprocess.run(["sh", "-c", 'ulimit -c unlimited || exit 97; exec "$0" "$@"', *command], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode == 97:
        pytest.skip("core files cannot be allowed here (the hard limit of ulimit -c)")
    [rec] = json.loads(out.read_text())["results"]
    assert rec["outcome"] == "error" and "killed by SIGABRT" in rec["message"], (rec, proc.stdout[-2000:])
    # whatever the core pattern names a dump ("core", "core.PID", "%e.core"): the run leaves its results alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"], sorted(tmp_path.iterdir())
