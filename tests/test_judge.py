"""The judge never shares a process with the code it judges.

Each attack comes from a layer under test (or its module, at import) and is run for real: a pytest
run in a subprocess with a bindings file that puts the attacker first (attacks of one kind share a run, one
after another, so that each also shows that the one before it reached nothing), then a wrong layer (off by 2x)
and a correct one. Whatever the attacker does, its own checks end as failed or error with a message
that says what happened, the two layers after it keep their verdicts, the results file holds every
planned check, and the exit code is non-zero.
"""
import json
import os
import textwrap

import pytest

from tests.support import ROOT, pytest_run

pytest.importorskip("torch")

CHECKS = ("values", "parameters")
# wrong numbers, right state: values fails, the gradients it rests on are blocked by it
OFF_BY_TWO = {"values": "failed", "gradients": "blocked", "parameters": "passed"}


def after(check):
    return {"OffByTwo": OFF_BY_TWO[check], "IMPL": "passed"}


def judged(tmp_path, attacker, *args, checks=CHECKS, timeout=300):
    """Run the attacker (or several, in order), then OffByTwo and the correct layer, in one run; returns
    (process, records by (impl, check))."""
    attackers = (attacker,) if isinstance(attacker, str) else tuple(attacker)
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text("".join(f'- {{contract: rmsnorm, impl: "{a}"}}\n' for a in attackers) + textwrap.dedent(f"""\
        - {{contract: rmsnorm, impl: "tests.hostile.torch_hostile:OffByTwo"}}
        - {{contract: rmsnorm, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL"}}
    """))
    out = tmp_path / "results.json"
    check_args = [a for c in checks for a in ("--check", c)]
    proc = pytest_run("-q", "--bindings", str(bindings), "--framework", "torch", *check_args, *args,
                      "--conformance-json", str(out), "--rootdir", str(ROOT), cwd=ROOT, timeout=timeout)
    assert out.exists(), f"no results file\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    records = json.loads(out.read_text())["results"]
    return proc, {(r["impl"].rpartition(":")[2] if "torch_hostile" in r["impl"] or "reference_impls" in r["impl"]
                   else r["impl"], r["check"]): r for r in records
            if not r.get("dtype")}  # the cases' own dtype: in the others a repeated failure is blocked by it


def assert_judged(proc, by, attacker_label, outcome, fragment, checks=CHECKS):
    """The attacker's checks end in ``outcome`` (or blocked by the one that names what happened, which says
    ``fragment``); the layers after it keep their verdicts; every record is there; the exit is non-zero."""
    text = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode not in (0, 5), text
    named = [by[(attacker_label, c)] for c in checks if by[(attacker_label, c)]["outcome"] in outcome]
    assert named and all(fragment in r["message"] for r in named), [by[(attacker_label, c)] for c in checks]
    for check in checks:
        rec = by[(attacker_label, check)]
        assert rec["outcome"] in outcome + ("blocked",), (check, rec)
        for impl, want in after(check).items():
            assert by[(impl, check)]["outcome"] == want, (impl, check, by[(impl, check)])
    assert len(by) == len({i for i, _ in by}) * len(checks), sorted(by)


def test_patching_numpy_or_the_harness_in_its_process_changes_no_verdict(tmp_path):
    attackers = ("tests.hostile.patches_numpy:IMPL", "tests.hostile.patches_harness:IMPL")
    proc, by = judged(tmp_path, attackers, checks=("values", "gradients"))
    for attacker in attackers:
        assert_judged(proc, by, attacker, ("failed",), "mismatched elements", checks=("values", "gradients"))


SKIPS_OR_EXITS = {
    "RaisesCheckSkipped": "CheckSkipped: not applicable, honestly",
    "RaisesUnsupported": "answered 'not applicable' (this framework cannot do that), which the judge does not accept",
    "CallsPytestSkip": "Skipped: nothing to see here",
    "SysExitZero": "SystemExit: 0",
}


def test_a_layer_cannot_declare_itself_skipped_or_exit(tmp_path):
    proc, by = judged(tmp_path, [f"tests.hostile.torch_hostile:{a}" for a in SKIPS_OR_EXITS])
    for attacker, fragment in SKIPS_OR_EXITS.items():
        assert_judged(proc, by, attacker, ("failed",), fragment)


def test_exit_zero_in_forward_or_at_import_ends_only_that_layers_checks(tmp_path):
    proc, by = judged(tmp_path, ("tests.hostile.torch_hostile:ExitsZero", "tests.hostile.exits_at_import:IMPL"))
    # in forward: a crash of that check alone; at import: an error for every check
    assert_judged(proc, by, "ExitsZero", ("error",), "ended without answering (exit status 0)")
    assert_judged(proc, by, "tests.hostile.exits_at_import:IMPL", ("error",), "ended its executor")


def test_timeouts_cannot_be_defeated(tmp_path):
    attackers = ("SwallowsEverything", "CancelsWatchdogs")
    # the cases' own dtype alone: each timed-out check is a wait of its own, and the other dtypes' would only repeat it
    proc, by = judged(tmp_path, [f"tests.hostile.torch_hostile:{a}" for a in attackers], "--check-timeout", "3",
                      "--dtype", "float32")
    for attacker in attackers:
        assert_judged(proc, by, attacker, ("error",), "timed out after 3 s")


def test_a_thread_left_running_neither_hangs_the_run_nor_reaches_the_next_target(tmp_path):
    proc, by = judged(tmp_path, "tests.hostile.torch_hostile:LeavesThread", timeout=120)
    # the layer itself computes correctly: its checks pass, with a note about the thread
    assert by[("LeavesThread", "values")]["outcome"] == "passed"
    assert "left thread(s) running" in json.dumps(by[("LeavesThread", "values")]["details"])
    for impl, want in after("values").items():
        assert by[(impl, "values")]["outcome"] == want
    assert proc.returncode == 1  # OffByTwo fails


def test_global_state_changed_at_import_is_undone_and_reported(tmp_path):
    proc, by = judged(tmp_path, "tests.hostile.globals_at_import:IMPL")
    rec = by[("tests.hostile.globals_at_import:IMPL", "values")]
    assert rec["outcome"] == "passed", rec
    assert "torch default dtype" in json.dumps(rec["details"]), rec
    for impl, want in after("values").items():
        assert by[(impl, "values")]["outcome"] == want


def test_raising_its_own_memory_limit_does_not_lift_the_cap(tmp_path):
    proc, by = judged(tmp_path, "tests.hostile.torch_hostile:LiftsMemoryCap", "--memory-limit", "2",
                      checks=("values",))
    assert_judged(proc, by, "LiftsMemoryCap", ("error",), "memory limit", checks=("values",))


def test_fork_in_a_layer_writes_nothing_twice(tmp_path):
    proc, by = judged(tmp_path, "tests.hostile.torch_hostile:Forks")
    assert by[("Forks", "values")]["outcome"] == "passed"
    for impl, want in after("values").items():
        assert by[(impl, "values")]["outcome"] == want
    assert proc.stdout.count("layer conformance") == 1, proc.stdout[-3000:]


def test_a_crashing_layer_under_xdist_loses_no_other_result(tmp_path):
    """os.abort() ends only the executor; the xdist worker (the judge) lives and no restart budget is spent."""
    proc, by = judged(tmp_path, "tests.hostile.torch_hostile:Aborts", "-n", "1")
    assert_judged(proc, by, "Aborts", ("error",), "killed by SIGABRT")




def test_an_executors_not_applicable_is_weighed_by_its_reason_never_by_where_it_was_raised():
    """n/a said in the layer's process is a claim: a reason of the catalogue that the process may give is taken;
    no reason, an unknown one, the contract's, or another framework's limit is the layer's failure (a forged
    adapter frame or a patched classifier gains nothing: nothing reads the traceback)."""
    from types import SimpleNamespace
    from layer_conformance.boundary.client import Executor, RemoteError
    from layer_conformance.record import NotApplicable

    from layer_conformance import wire
    from layer_conformance.protocol import NotApplicablePart

    def claim(framework, reason, code, said=None):
        said = wire.encode(NotApplicablePart(reason, code), None) if said is None else said
        info = {"type": "NotApplicable", "message": reason, "text": f"NotApplicable: {reason}", "not_applicable": said}
        return Executor._claimed_not_applicable(SimpleNamespace(framework=framework, role="layer"), info)

    taken = claim("torch", "no vmap rule", "custom_function_no_vmap")
    assert isinstance(taken, NotApplicable) and taken.code == "custom_function_no_vmap"
    assert isinstance(claim("jax", "immutable", "immutable_arrays"), NotApplicable)
    for framework, code, why in (("torch", "", "names no reason"), ("torch", "made_up", "names no reason"),
                                 ("torch", "contract", "only the judge says what the contract makes n/a"),
                                 ("torch", "immutable_arrays", "not a limit of torch"),
                                 ("torch", "no_strides", "not a limit of torch")):
        refused = claim(framework, "forged", code)
        assert isinstance(refused, RemoteError) and why in refused.remote_text, (code, refused)
    # the typed n/a only: an untyped dict, or a reply of another type, names no reason
    for said in ({"reason": "forged", "code": "custom_function_no_vmap"}, {"__reply__": "nope", "fields": []}, "n/a"):
        refused = claim("torch", "forged", "", said=said)
        assert isinstance(refused, RemoteError) and "names no reason" in refused.remote_text, (said, refused)
