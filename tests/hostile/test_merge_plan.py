"""`merge` holds each shard to its plan (issue 29 §4): a results file whose failing records were deleted,
one whose run did not complete, one edited after its run, and one shard given twice are refused (exit 4,
naming the file and why); real shards of one run merge, and the merged file keeps the plan and its own hash.

The shards are real: the public command line in subprocesses (pytest-split's ``--splits 2 --group k``,
``--conformance-json``), a small selection with a failing layer; the files are then edited the way a
hostile layer (or anything between the shard and the merge) would. Path options are written ``--opt=PATH``
(see tests/test_sharding.py: a separate argument outside the repository would move the rootdir).
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from layer_conformance import results
from tests.support import ROOT, pytest_command

pytest.importorskip("pytest_split")
pytest.importorskip("torch")

EXIT_USAGE = 4   # layer_conformance.cli: a results file that cannot be merged
# a failing layer: values fails (NaN), gradients is blocked by it, parameters passes; rmsnorm declares no
# modes, so `modes` is never collected and every shard's file holds its n/a record without an item
SELECTION = ("--contract", "rmsnorm", "--framework", "torch", "--dtype", "float32",
             "--impl", "tests.hostile.torch_hostile:ReturnsNaN",
             "--check", "values", "--check", "parameters", "--check", "gradients", "--check", "modes")


def _merge(*args):
    return subprocess.run([sys.executable, "-m", "layer_conformance", "merge", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _load(path) -> dict:
    return json.loads(Path(path).read_text())


def _save(path, doc, rehash=False) -> Path:
    """Write an edited shard; ``rehash``: with the hash recomputed, as a layer that knows the format would."""
    if rehash:
        doc = results.with_hash(doc)
    Path(path).write_text(json.dumps(doc, indent=2))
    return Path(path)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The two shards of one run of SELECTION: (shard 1, shard 2, the one holding the failing record)."""
    tmp = tmp_path_factory.mktemp("merge_plan")
    paths = [tmp / f"shard-{k}.json" for k in (1, 2)]
    procs = [subprocess.Popen(pytest_command("-q", "-n", "0", *SELECTION, "--splits", "2", "--group", str(k),
                                             f"--conformance-json={p}"),
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for k, p in zip((1, 2), paths)]
    for k, proc in enumerate(procs, 1):
        out = proc.communicate(timeout=300)[0]
        assert proc.returncode in (0, 1), f"shard {k}:\n{out[-3000:]}"
    failing = [p for p in paths if any(r["outcome"] == "failed" for r in _load(p)["results"])]
    assert len(failing) == 1, "one shard holds the failing check"
    return paths[0], paths[1], failing[0]


def test_shards_state_their_plan_and_hash(shards):
    """How `planned` relates to the records: one record per planned check (an item), plus the n/a
    records of checks never collected (`not_collected`), which every shard holds."""
    for path in shards[:2]:
        doc = _load(path)
        assert doc["schema_version"] == results.SCHEMA_VERSION and doc["complete"] is True
        assert doc["not_collected"] == 1 and doc["planned"] >= 1
        assert len(doc["results"]) == doc["planned"] + doc["not_collected"]
        assert [r["check"] for r in doc["results"] if r.get("not_applicable") and "duration" not in r] == ["modes"]
        assert doc[results.HASH_FIELD] == results.records_hash(doc)
    assert _load(shards[0])["planned"] + _load(shards[1])["planned"] == 3


def test_a_correct_two_shard_merge_passes_and_keeps_the_plan(shards, tmp_path):
    one, two, _ = shards
    out = tmp_path / "merged.json"
    proc = _merge(one, two, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not proc.stderr, proc.stderr
    gated = _merge(one, two, "-o", out, "--gate")   # the layer's failure fails the gate, nothing else
    assert gated.returncode == 1 and "gate: 1 failing check(s)" in gated.stdout, gated.stdout + gated.stderr
    doc = _load(out)
    assert doc["complete"] is True and doc["planned"] == 3 and doc["not_run"] == 0
    assert len(doc["results"]) == 4 and doc["not_collected"] == 1   # the n/a record once
    assert doc[results.HASH_FIELD] == results.records_hash(doc)
    # the merged file is a results file like any: it merges again (alone, or with another run's)
    again = _merge(out, "-o", tmp_path / "again.json")
    assert again.returncode == 0, again.stdout + again.stderr


def test_deleted_failing_records_are_refused(shards, tmp_path):
    _, other, failing = shards
    doc = _load(failing)
    doc["results"] = [r for r in doc["results"] if r["outcome"] != "failed"]
    for rehash in (False, True):   # the hash left as it was, or recomputed by a layer that knows how
        edited = _save(tmp_path / f"deleted-{rehash}.json", dict(doc), rehash=rehash)
        proc = _merge(edited, other, "-o", tmp_path / "m.json", "--gate")
        assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
        assert f"{edited}: it holds {len(doc['results'])} records where its plan accounts for " \
               f"{len(doc['results']) + 1}" in proc.stderr and "removed" in proc.stderr, proc.stderr
        assert not (tmp_path / "m.json").exists(), "nothing is merged"


def test_a_shard_that_did_not_complete_is_refused(shards, tmp_path):
    """A real incomplete shard (SIGTERM mid-run): its file is as its run wrote it, and says complete: false."""
    out = tmp_path / "interrupted.json"
    journal = Path(str(out) + ".journal")
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text('- {contract: rmsnorm, impl: "layer_conformance.reference_impls.torch.rmsnorm:IMPL"}\n'
                        '- {contract: rmsnorm, impl: "tests.hostile.torch_hostile:Hangs"}\n')
    proc = subprocess.Popen(pytest_command("-q", "-n", "0", "--dtype", "float32", f"--bindings={bindings}",
                                           "--framework", "torch", "--check", "values", "--check", "parameters",
                                           "--check-timeout", "120", f"--conformance-json={out}"),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (journal.exists() and journal.read_text().count('"record"') >= 2):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    doc = _load(out)
    assert doc["complete"] is False and doc["not_run"] >= 1, output[-3000:]
    assert doc[results.HASH_FIELD] == results.records_hash(doc), "an incomplete file is still as its run wrote it"
    merged = _merge(shards[0], out, "-o", tmp_path / "m.json", "--gate")
    assert merged.returncode == EXIT_USAGE, merged.stdout + merged.stderr
    assert f"{out}: its run did not complete its plan (complete: false" in merged.stderr, merged.stderr
    assert "edited" not in merged.stderr, "its records are its plan's: only its incompleteness is refused"
    # a hostile `complete: true` on it is an edit the hash shows
    _save(out, dict(doc, complete=True))
    merged = _merge(shards[0], out, "-o", tmp_path / "m.json", "--gate")
    assert merged.returncode == EXIT_USAGE and f"{out}: its records or plan counts do not hash" in merged.stderr


def test_the_same_shard_twice_is_refused(shards, tmp_path):
    one, two, _ = shards
    proc = _merge(one, two, one, "-o", tmp_path / "m.json", "--gate")
    assert proc.returncode == EXIT_USAGE and f"{one} is given 2 times" in proc.stderr, proc.stdout + proc.stderr
    copy = tmp_path / "copy.json"   # under another name, its environment (date, command) changed
    doc = _load(one)
    copy.write_text(json.dumps(dict(doc, environment=dict(doc["environment"], date="2000-01-01"))))
    proc = _merge(one, two, copy, "-o", tmp_path / "m.json")
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert f"{one} and {copy} are the same results" in proc.stderr and "given twice" in proc.stderr
    # the merged file beside the shards it came from: their checks counted twice
    merged = tmp_path / "merged.json"
    assert _merge(one, two, "-o", merged).returncode == 0
    proc = _merge(one, two, merged, "-o", tmp_path / "m.json")
    assert proc.returncode == EXIT_USAGE and "the same checks were run in more than one" in proc.stderr, proc.stderr


def test_an_edited_record_is_refused(shards, tmp_path):
    _, other, failing = shards
    doc = _load(failing)
    for r in doc["results"]:
        if r["outcome"] == "failed":
            r.update(outcome="passed", message="")
    edited = _save(tmp_path / "edited.json", doc)
    proc = _merge(edited, other, "-o", tmp_path / "m.json", "--gate")
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert f"{edited}: its records or plan counts do not hash to its {results.HASH_FIELD}" in proc.stderr
    # the hash removed as well: a results file of this schema version always has one
    doc.pop(results.HASH_FIELD)
    _save(edited, doc)
    proc = _merge(edited, other, "-o", tmp_path / "m.json", "--gate")
    assert proc.returncode == EXIT_USAGE and f"{edited}: it has no {results.HASH_FIELD}" in proc.stderr, proc.stderr


def test_a_file_of_an_older_schema_merges_with_a_note(shards, tmp_path):
    """Before schema_version 3 a results file had no hash: it merges, and the note says to rerun it."""
    one, two, _ = shards
    doc = _load(one)
    for k in (results.HASH_FIELD, "not_collected"):
        doc.pop(k)
    old = _save(tmp_path / "v2.json", dict(doc, schema_version=2))
    out = tmp_path / "m.json"
    proc = _merge(old, two, "-o", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"note: {old}: no {results.HASH_FIELD}" in proc.stderr and "rerun it" in proc.stderr
    merged = _load(out)
    assert "planned" not in merged and merged[results.HASH_FIELD] == results.records_hash(merged)
    # its `complete: false` is still refused
    _save(old, dict(doc, schema_version=2, complete=False))
    proc = _merge(old, two, "-o", out)
    assert proc.returncode == EXIT_USAGE and "did not complete its plan" in proc.stderr, proc.stderr
