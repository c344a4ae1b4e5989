"""Beyond one machine: the bundled torch matrix split by duration into 3 shards (pytest-split), run
as 3 processes and merged, gives the records of the unsharded run; xdist's --tx gateways keep ids
and the one-framework-per-worker scheduling.

Path options are written ``--opt=PATH``: pytest picks its rootdir before plugins' options are known,
so a separate argument naming an existing file outside the repository would move the rootdir (and
with it every node id).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from layer_conformance.nodeids import parse as parse_nodeid
from tests.support import ROOT, pytest_command, pytest_run

pytest.importorskip("pytest_split")
pytest.importorskip("torch")

SHARDS = 3


def _harness(*args):
    return subprocess.run([sys.executable, "-m", "layer_conformance", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _records(path):
    """A results file's records, timings aside (a check's `duration` differs from run to run)."""
    return [{k: v for k, v in r.items() if k != "duration"} for r in json.loads(Path(path).read_text())["results"]]


def _ran(path) -> set:
    """The node ids of the checks a run collected and ran: a check the contract never asks for is no item, and
    every shard's file holds its n/a record (without a duration), which the merge keeps once."""
    return {r["nodeid"] for r in json.loads(Path(path).read_text())["results"] if r.get("duration") is not None}


# four contracts, one of each kind of target, are enough to split (the whole matrix would only repeat them)
SOME = [a for c in ("rmsnorm", "causal_mask", "dropout", "round_ste") for a in ("--contract", c)]


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory):
    """One unsharded run of the torch matrix (SOME of it), which also stores the durations the shards split by."""
    tmp = tmp_path_factory.mktemp("sharding")
    durations, results = tmp / "durations.json", tmp / "full.json"
    proc = pytest_run("--framework", "torch", *SOME, "--store-durations", f"--durations-path={durations}",
                      f"--conformance-json={results}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp, durations, results


def test_durations_file_maps_to_conformance_ids(unsharded):
    _, durations, results = unsharded
    stored = json.loads(durations.read_text())
    ids = _ran(results)
    assert ids and set(stored) == ids, "pytest-split's durations are keyed by the conformance node ids"
    assert not any(i.startswith("/") for i in ids), "ids are relative to the rootdir, the same on every machine"


def test_three_shards_merged_equal_the_unsharded_run(unsharded):
    tmp, durations, results = unsharded
    procs = [subprocess.Popen(pytest_command("--framework", "torch", *SOME, f"--splits={SHARDS}", f"--group={k}",
                                             f"--durations-path={durations}",
                                             f"--conformance-json={tmp / f'results-{k}.json'}",
                                             # one shard also spreads over xdist workers, as `-n auto` in a CI
                                             # shard would
                                             *(["-n", "2"] if k == 1 else [])),
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for k in range(1, SHARDS + 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for k, (p, out) in enumerate(zip(procs, outs), 1):
        assert p.returncode == 0, f"shard {k}:\n{out[-3000:]}"
        if k != 1:   # under xdist pytest-split's line is printed by the workers, not shown
            assert f"Running group {k}/{SHARDS}" in out
    shards = [_records(tmp / f"results-{k}.json") for k in range(1, SHARDS + 1)]
    assert all(shards), "every shard ran some checks"
    ids = [_ran(tmp / f"results-{k}.json") for k in range(1, SHARDS + 1)]
    assert sum(map(len, ids)) == len(set().union(*ids)) == len(_ran(results)), "no check runs in two shards"

    merged = tmp / "merged.json"
    proc = _harness("merge", *[str(tmp / f"results-{k}.json") for k in range(1, SHARDS + 1)], "-o", str(merged),
                    "--baseline", str(results), "--html", str(tmp / "merged.html"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gate: passed" in proc.stdout
    # timings and the documents' environments (dates, commands) are left out
    assert _records(merged) == _records(results)
    assert (tmp / "merged.html").stat().st_size > 0

    # a shard whose results never arrived: its checks are missing against the baseline, the gate fails
    proc = _harness("merge", str(tmp / "results-1.json"), str(tmp / "results-2.json"), "-o", str(tmp / "two.json"),
                    "--baseline", str(results))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # every check of the lost shard counts, whatever its outcome was
    lost = ids[2] - ids[0] - ids[1]   # (its n/a records are in the other shards' files too)
    assert lost and f"{len(lost)} baseline check(s) no longer run" in proc.stdout, proc.stdout


def _doc(records):
    return {"schema_version": 1, "harness_version": "0", "environment": {}, "results": records}


def _rec(check, outcome, **extra):
    return {"contract": "rmsnorm", "impl": "m:L", "framework": "torch", "device": "cpu", "check": check,
            "outcome": outcome, "message": "" if outcome == "passed" else "gain halved", **extra}


def test_merge_gate_verdict(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc([_rec("values", "passed")])))
    b.write_text(json.dumps(_doc([_rec("gradients", "failed")])))
    out = tmp_path / "m.json"
    # merging alone never judges (the environments' merge in scripts/conformance.sh relies on it)
    assert _harness("merge", str(a), str(b), "-o", str(out)).returncode == 0
    gated = _harness("merge", str(a), str(b), "-o", str(out), "--gate")
    assert gated.returncode == 1 and "FAILED: rmsnorm m:L [torch-cpu] gradients" in gated.stdout
    assert len(_records(out)) == 2, "the merged file is written before the verdict"
    # the failure was there before: no regression
    base = tmp_path / "base.json"
    base.write_text(json.dumps(_doc([_rec("values", "passed"), _rec("gradients", "failed")])))
    assert _harness("merge", str(a), str(b), "-o", str(out), "--baseline", str(base)).returncode == 0
    base.write_text(json.dumps(_doc([_rec("values", "passed"), _rec("gradients", "passed")])))
    regressed = _harness("merge", str(a), str(b), "-o", str(out), "--baseline", str(base))
    assert regressed.returncode == 1 and "1 regression(s)" in regressed.stdout
    # an expected failure (annotated by the shard's --expectations) does not fail the gate
    b.write_text(json.dumps(_doc([_rec("gradients", "failed", expected=True)])))
    assert _harness("merge", str(a), str(b), "-o", str(out), "--gate").returncode == 0
    assert _harness("merge", str(a), str(tmp_path / "missing.json"), "-o", str(out), "--gate").returncode == 4


def _workers(output: str) -> dict:
    """framework -> the xdist workers that ran its checks, from ``-v`` lines ``[gw0] [ 5%] PASSED id``."""
    seen: dict = {}
    for worker, nodeid in re.findall(r"^\[(gw\d+)\] \[\s*\d+%\] \w+ (\S+)", output, flags=re.M):
        seen.setdefault(parse_nodeid(nodeid)["framework"], set()).add(worker)
    return seen


@pytest.mark.slow
def test_remote_gateways_keep_ids_and_scheduling(tmp_path):
    pytest.importorskip("tensorflow")
    args = ["--framework", "torch", "--framework", "tensorflow", "--contract", "rmsnorm"]
    local = pytest_run(*args, "-n", "0", f"--conformance-json={tmp_path / 'local.json'}")
    assert local.returncode == 0, local.stdout[-3000:]
    # popen gateways are xdist's remote mode run locally: each worker is a fresh interpreter driven by execnet
    remote = pytest_run(*args, "-v", "-d", f"--tx=2*popen//python={sys.executable}",
                        f"--conformance-json={tmp_path / 'remote.json'}")
    assert remote.returncode == 0, remote.stdout[-3000:]
    assert _records(tmp_path / "remote.json") == _records(tmp_path / "local.json")
    workers = _workers(remote.stdout)
    assert set(workers) == {"torch", "tensorflow"}
    # a worker keeps to the frameworks whose executors it started; only when its own run out does it help
    # with another's: at most one framework is shared
    assert sum(len(w) > 1 for w in workers.values()) <= 1, f"frameworks kept on a worker: {workers}"
    assert workers["torch"] != workers["tensorflow"]
