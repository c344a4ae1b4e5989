"""The result record (layer_conformance.record) and the results file that stores it (layer_conformance.results)."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from layer_conformance import results
from layer_conformance.record import KEY, Record
from layer_conformance.report.html import build_data

ROOT = Path(__file__).resolve().parent.parent


def _rec(check="values", outcome="passed", **kw):
    base = dict(contract="rmsnorm", impl="m:L", framework="torch", device="cpu", check=check, outcome=outcome)
    return Record(**{**base, **kw})


# --- the record -------------------------------------------------------------------------------

def test_json_round_trip_keeps_every_field():
    full = _rec("gradients", "blocked", message="blocked by parameters", nodeid="specs/r.yaml::r[torch-cpu]::g",
                details={"symptom": "x", "max_abs_error": 0.5}, blocked_by="parameters", not_applicable=True,
                unavailable=True, usage_error=True, not_run=True, duration=1.25, expected=True,
                unexpectedly_passed=True, expectation={"reason": "r", "where": "e.yaml:2"})
    text = json.dumps(full.to_json())
    assert Record.from_json(json.loads(text)) == full


def test_json_form_is_the_one_files_already_hold():
    # a record as a version-1 file holds it reads back and is written out unchanged
    old = {"contract": "rmsnorm", "impl": "m:L", "framework": "torch", "device": "cpu", "check": "native",
           "outcome": "skipped", "message": "no native layer", "nodeid": "n", "not_applicable": True,
           "details": {}}
    assert Record.from_json(old).to_json() == old
    # unset optional fields are left out, so a fresh record is as small as before
    assert _rec().to_json() == {"contract": "rmsnorm", "impl": "m:L", "framework": "torch", "device": "cpu",
                                "check": "values", "outcome": "passed", "message": ""}
    # a field this version does not know survives a round trip
    assert Record.from_json(dict(old, dtype="float32")).to_json()["dtype"] == "float32"


@pytest.mark.parametrize("obj,problem", [
    ({"contract": "r", "impl": "i", "framework": "torch", "device": "cpu", "outcome": "passed"}, "without check"),
    ({"contract": "r", "impl": "i", "framework": "torch", "device": "cpu", "check": "v", "outcome": "ok"},
     "outcome 'ok'"),
    ({"contract": 3, "impl": "i", "framework": "torch", "device": "cpu", "check": "v", "outcome": "passed"},
     "contract is 3"),
    (["not", "a", "mapping"], "mapping"),
])
def test_a_malformed_record_is_refused_with_the_reason(obj, problem):
    with pytest.raises(ValueError, match=problem):
        Record.from_json(obj)


def test_key_is_the_identity_fields_in_order():
    r = _rec(message="one", duration=3.0)
    assert KEY == ("contract", "impl", "framework", "device", "check", "dtype")
    assert r.key() == ("rmsnorm", "m:L", "torch", "cpu", "values", "")
    assert r.key() == _rec(message="two", outcome="failed").key()   # what it came to is not its identity
    for field in KEY:
        assert _rec(**{field: "other"}).key() != r.key(), field


@pytest.mark.parametrize("fields,status", [
    (dict(outcome="passed"), "passed"),
    (dict(outcome="failed"), "failed"),
    (dict(outcome="error"), "error"),
    (dict(outcome="skipped"), "skipped"),
    (dict(outcome="skipped", not_applicable=True), "n/a"),
    (dict(outcome="skipped", unavailable=True), "skipped"),
    (dict(outcome="blocked", blocked_by="parameters"), "blocked"),
    (dict(outcome="error", not_run=True, message="not run: interrupted"), "error"),
    (dict(outcome="failed", expected=True), "xfail"),
    (dict(outcome="error", expected=True), "xfail"),
    (dict(outcome="passed", unexpectedly_passed=True), "xpass"),
])
def test_status_for_every_outcome_is_the_same_in_every_view(fields, status):
    r = _rec(**fields)
    assert r.status() == status
    # the HTML report and the summary table show the record's own status
    doc = results.document([r], {})
    assert [c["status"] for c in build_data(doc)["checks"]] == [status]
    assert results.SYMBOL[status] in results.summary_table([r]).splitlines()[2].split()


# --- the results file -------------------------------------------------------------------------

def _write(path, records, **env):
    results.write(path, records, {"frameworks": {"torch": "2"}, "devices": {}, **env})
    return path


def test_write_then_load_gives_the_records_back(tmp_path):
    recs = [_rec("values", "failed", message="off", duration=0.5), _rec("gradients", "passed")]
    doc = results.load(_write(tmp_path / "r.json", recs))
    assert doc["schema_version"] == results.SCHEMA_VERSION
    assert doc["results"] == sorted(recs, key=Record.key)


def test_a_file_of_the_previous_version_still_loads(tmp_path):
    p = tmp_path / "v1.json"
    p.write_text(json.dumps({"schema_version": 1, "results": [_rec().to_json()]}))
    assert results.load(p)["results"] == [_rec()]


def test_a_newer_schema_version_is_refused_naming_the_file(tmp_path):
    p = tmp_path / "future.json"
    p.write_text(json.dumps({"schema_version": results.SCHEMA_VERSION + 1, "results": []}))
    with pytest.raises(results.ResultsFileError) as exc:
        results.load(p)
    assert str(p) in str(exc.value) and "newer harness" in str(exc.value)


@pytest.mark.parametrize("text,problem", [
    ("{", "invalid JSON"),
    ('{"schema_version": 2}', "no `results` list"),
    ('{"schema_version": 2, "results": [{"contract": "r"}]}', "results[0]: record without impl"),
])
def test_a_broken_file_is_refused_naming_the_file(tmp_path, text, problem):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(results.ResultsFileError) as exc:
        results.load(p)
    assert str(exc.value).startswith(f"{p}: ") and problem in str(exc.value)


def test_merging_two_shard_files(tmp_path):
    a = _write(tmp_path / "a.json", [_rec("values", "passed"), _rec("gradients", "failed", message="off")])
    b = _write(tmp_path / "b.json", [_rec("values", "passed"), _rec("devices", "passed", framework="jax")],
               frameworks={"jax": "0.4"})
    merged = results.merge([results.load(a), results.load(b)], names=[a, b])
    assert [r.key() for r in merged["results"]] == sorted(
        [_rec("values").key(), _rec("gradients").key(), _rec("devices", framework="jax").key()])
    assert merged["environment"]["frameworks"] == {"torch": "2", "jax": "0.4"}
    out = tmp_path / "m.json"
    results.write_document(out, merged)
    assert results.load(out)["results"] == merged["results"]
    # the same check with another verdict in two files is a conflict, named
    c = _write(tmp_path / "c.json", [_rec("gradients", "passed")])
    with pytest.raises(results.ResultsFileError, match="conflicting results for rmsnorm/m:L/torch/cpu/gradients"):
        results.merge([results.load(a), results.load(c)], names=[a, c])


# --- the import map: no cycles -----------------------------------------------------------------


def _import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the harness modules it imports, at the top or inside a function (a lazy import closes a
    cycle all the same)."""
    def name(p: Path) -> str:
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        parts[0] = "layer_conformance" if parts[0] == "harness" else parts[0]   # the folder's installed name
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    files = {name(p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                # `from . import wire` imports the submodule (its package is already being imported)
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for n in names:
                while n and n not in files:   # `from .x import Name`: the module x
                    n = n.rpartition(".")[0]
                if n and n != mod:
                    deps.add(n)
        graph[mod] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "harness"
    (pkg / "gate").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gate" / "__init__.py").write_text("from .hooks import x\n")
    (pkg / "gate" / "hooks.py").write_text("def f():\n    from ..report import y\n")
    (pkg / "report.py").write_text("from .gate import compare\n")
    assert _cycles(_import_graph(pkg)) == [["layer_conformance.gate", "layer_conformance.gate.hooks", "layer_conformance.report"]]


def test_the_harness_import_map_has_no_cycle():
    graph = _import_graph(ROOT / "harness")
    assert "layer_conformance.results" in graph["layer_conformance.gate.hooks"] and "layer_conformance.plugin" in graph["layer_conformance.gate.hooks"]
    assert _cycles(graph) == []
    # the one n/a exception is the protocol's (both sides raise it): the record type imports that leaf and nothing else
    assert graph["layer_conformance.record"] <= {"layer_conformance.protocol", "layer_conformance.protocol.not_applicable"}, \
        "the record type imports nothing else from the harness"


def test_no_arrow_runs_from_the_adapters_to_the_checks():
    graph = _import_graph(ROOT / "harness")
    adapters = {m: deps for m, deps in graph.items() if m.startswith("layer_conformance.layerside")}
    assert adapters, "no adapter modules found"
    wrong = {m: sorted(d for d in deps if d.startswith("layer_conformance.checks")) for m, deps in adapters.items()}
    assert not {m: d for m, d in wrong.items() if d}


def test_the_gate_uses_no_private_name_of_the_plugin():
    for path in (ROOT / "harness" / "gate").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("plugin"):
                assert not [a.name for a in node.names if a.name.startswith("_")], path


@pytest.mark.parametrize("module", ["layer_conformance.gate", "layer_conformance.report", "layer_conformance.results", "layer_conformance.cli"])
def test_each_module_imports_alone(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_dtype_is_part_of_the_identity_and_absent_for_the_cases_own():
    r = _rec()
    assert "dtype" not in r.to_json()                        # a file without dtypes reads as before
    assert Record.from_json(r.to_json()).key() == r.key()
    bf16 = _rec(dtype="bfloat16")
    assert bf16.to_json()["dtype"] == "bfloat16" and bf16.key() != r.key()
    assert Record.from_json(bf16.to_json()).key() == bf16.key()
    assert "[torch-cpu-bfloat16]" in bf16.describe() and "[torch-cpu]" in r.describe()
