"""With -n 0 the compiled and export checks run on a second lane (layer_conformance.lane): a thread with layer executors
of its own. Their verdicts are those the main thread gives, a layer that hangs there is ended by the per-check
timeout and loses only its check, and the lane works on the frameworks the main thread runs last first."""
import json

import pytest

from tests.support import ROOT, pytest_run

pytest.importorskip("torch")


def _run(tmp_path, name, *args):
    out = tmp_path / f"{name}.json"
    proc = pytest_run("-q", "-n", "0", *args, "--conformance-json", str(out), "--rootdir", str(ROOT), cwd=ROOT,
                      timeout=600)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, {(r["impl"].rpartition(":")[2], r["check"]): r for r in records}


def test_a_check_on_the_lane_gives_the_verdict_the_main_thread_gives(tmp_path):
    mutant = ("--contract", "round_ste", "--impl", "tests.mutants.torch_compiled:round_ste_annealed",
              "--framework", "torch")
    # with values beside it, compiled runs on the lane; alone, on the main thread (no lane without others)
    _, lane = _run(tmp_path, "lane", *mutant, "--check", "values", "--check", "compiled")
    _, main = _run(tmp_path, "main", *mutant, "--check", "compiled")
    got, want = lane[("round_ste_annealed", "compiled")], main[("round_ste_annealed", "compiled")]
    assert got["outcome"] == want["outcome"] == "failed", (got, want)
    assert "recompiled on a second call with identical inputs (guard failed" in got["message"]
    assert got["message"] == want["message"] and got["details"] == want["details"]
    assert 0 < got["duration"] < 120  # the check's own time, not the wait for it


def test_a_layer_that_hangs_on_the_lane_loses_only_its_check(tmp_path):
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text('- {contract: rmsnorm, impl: "tests.hostile.torch_hostile:HangsWhenPickled"}\n'
                        '- {contract: rmsnorm, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL"}\n')
    proc, by = _run(tmp_path, "hang", "--bindings", str(bindings), "--dtype", "float32", "--check", "values",
                    "--check", "export", "--check-timeout", "5")
    hung = by[("HangsWhenPickled", "export")]  # saving the whole module pickles it: the lane's executor hangs
    assert hung["outcome"] == "error" and "timed out after 5 s" in hung["message"], hung
    assert "in __reduce_ex__)" in hung["message"], hung["message"]
    assert by[("HangsWhenPickled", "values")]["outcome"] == "passed"
    # the next target on the lane gets a clean executor and its verdict
    assert by[("IMPL", "export")]["outcome"] == "passed", by[("IMPL", "export")]
    assert by[("IMPL", "values")]["outcome"] == "passed"
    assert proc.returncode == 1, proc.stdout[-2000:]


class _Session:
    def lane(self):
        return self

    def abort(self):
        pass

    def close(self):
        pass


class _Node:
    def __init__(self, framework, name):
        self.nodeid, self.target = name, type("T", (), {"framework": framework})()


class _Item:
    def __init__(self, framework, name, check, ran, seconds=0.0):
        self.parent, self.check, self.nodeid, self._ran = _Node(framework, name), check, f"{name}::{check}", ran
        self.seconds = seconds

    def compute(self, session):
        import threading
        import time
        time.sleep(self.seconds)
        self._ran.append((threading.current_thread().name, self.nodeid))
        return {"check": self.check, "outcome": "passed", "node": self.nodeid}


def test_the_lane_takes_the_frameworks_the_main_thread_runs_last_first():
    from layer_conformance.lane import Lane
    from layer_conformance.plugin import start_rank
    ran = []
    items = [_Item(fw, f"{fw}-{n}", check, ran) for fw in ("jax", "torch", "tensorflow") for n in (1, 2)
             for check in ("values", "compiled", "export")]
    lane = Lane(_Session(), ["compiled", "export"], start_rank)
    lane.plan(items)
    verdict, took = lane.verdict(items[1])
    assert verdict["outcome"] == "passed" and took >= 0
    for item in items:
        if item.check != "values":
            lane.verdict(item)
    lane.close()
    assert len(ran) == 12 and all("::values" not in n for _, n in ran)  # only the lane's checks, each once
    assert len({n for _, n in ran}) == 12
    on_lane = [start_rank(n.split("-")[0]) for thread, n in ran if thread.startswith("conformance-lane")]
    assert on_lane == sorted(on_lane, reverse=True), ran


def test_the_main_thread_waiting_for_the_lane_takes_the_queues_last_jobs():
    """Both cores on the queue: while the main thread waits for a job the lane is running, it computes the
    last jobs the lane has not begun on its own executors; each item still gets its own verdict, once."""
    import threading
    from layer_conformance.lane import Lane
    from layer_conformance.plugin import start_rank
    ran = []
    items = [_Item("torch", f"torch-{n}", "compiled", ran, seconds=0.05) for n in range(8)]
    lane = Lane(_Session(), ["compiled"], start_rank)
    lane.plan(items)
    verdicts = [lane.verdict(item)[0]["node"] for item in items]
    lane.close()
    assert verdicts == [item.nodeid for item in items]
    assert sorted(n for _, n in ran) == sorted(item.nodeid for item in items)  # each computed once
    main = [n for thread, n in ran if thread == threading.main_thread().name]
    lane_ran = [n for thread, n in ran if thread.startswith("conformance-lane")]
    assert main and lane_ran, ran
    assert items[-1].nodeid in main  # taken from the back of the queue
