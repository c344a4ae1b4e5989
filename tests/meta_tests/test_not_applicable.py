""""Not applicable" is said one way, end to end (issue 30 §3): ``layer_conformance.protocol.NotApplicable(reason)``,
raised by adapters and checks alike; one field on the executor's wire (``not_applicable``, the reason); one record
form (outcome ``skipped``, ``not_applicable`` true, ``message`` the reason); the views' "n/a" read from it. The
contract's keys map to that form through one function (``checks.applicable.contract_says``). A skip that is not
n/a (``CheckSkipped``: ``checks.<id>.skip``, a missing device) keeps its own name; a method an adapter lacks is n/a
from the catalog (``checks.applicable.adapter_lacks``)."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from tests.support import pytest_run

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"

# the one n/a exception, and the one skip that is not n/a (checks.base says why the two differ);
# and the value a typed reply holds for a part that is n/a while the rest of the reply goes on (not an exception)
ALLOWED_CLASSES = {("protocol/not_applicable.py", "NotApplicable"), ("checks/base.py", "CheckSkipped"),
                   ("protocol/not_applicable.py", "NotApplicablePart")}
# where the record form of n/a is written: the runner (from the exception, and from contract_says), the run's
# collection phase (the records of checks never collected, from contract_says' reasons) and contract_says itself
ALLOWED_NA_TRUE = {"runner.py", "run/collection.py", "checks/applicable.py"}
_NA_NAME = re.compile(r"unsupported|not_?applicable|n_?a$|skip", re.I)


def _modules():
    for path in sorted(HARNESS.rglob("*.py")):
        yield path.relative_to(HARNESS).as_posix(), ast.parse(path.read_text(), str(path))


def test_one_exception_class_says_not_applicable():
    found = {(rel, node.name) for rel, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.ClassDef) and _NA_NAME.search(node.name)}
    assert found == ALLOWED_CLASSES, found


def test_the_old_names_and_flags_are_gone():
    """No ``Unsupported`` anywhere, no "unsupported" wire key, no match on an exception's type name for n/a (a
    layer raising NotApplicable is the layer raising), no ``CheckSkipped(..., not_applicable=...)``."""
    problems = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "Unsupported" or \
                    isinstance(node, ast.alias) and node.name.endswith("Unsupported"):
                problems.append(f"{rel}:{node.lineno if hasattr(node, 'lineno') else '?'}: Unsupported")
            if isinstance(node, ast.Constant) and node.value in ("unsupported", "Unsupported", "NotApplicable"):
                problems.append(f"{rel}:{node.lineno}: the string {node.value!r}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "CheckSkipped" and \
                    (len(node.args) > 1 or node.keywords):
                problems.append(f"{rel}:{node.lineno}: CheckSkipped with more than its reason")
    assert not problems, problems
    from layer_conformance.protocol import NotApplicable as from_adapters
    from layer_conformance.record import NotApplicable
    assert from_adapters is NotApplicable


def test_the_record_form_of_na_is_written_in_one_place():
    """``not_applicable=True`` / ``"not_applicable": True`` only where the one exception or contract_says'
    answer becomes a record."""
    places = set()
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "not_applicable" and \
                    isinstance(node.value, ast.Constant) and node.value.value is True:
                places.add(rel)
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "not_applicable" and \
                            isinstance(v, ast.Constant) and v.value is True:
                        places.add(rel)
    assert places <= ALLOWED_NA_TRUE, places - ALLOWED_NA_TRUE


def test_every_contract_key_maps_through_contract_says(tmp_path):
    from layer_conformance.checks.applicable import contract_says
    from layer_conformance.contract import bundled_contracts, load_contract

    c = load_contract(bundled_contracts()["rmsnorm"])
    c.data = dict(c.data, checks={"values": {"skip": "too slow here"}}, export={"not_applicable": "served from C++"},
                  frameworks={"mxnet": {"not_applicable": "no such layer"}},
                  native=dict(c.data.get("native") or {}, tensorflow={"none": "Keras has none"}))
    assert contract_says(c, "values", "torch") == {"outcome": "skipped", "message": "too slow here",
                                                   "not_applicable": False}
    assert contract_says(c, "export", "torch") == {"outcome": "skipped", "message": "served from C++",
                                                   "not_applicable": True, "na_source": "contract"}
    said = contract_says(c, "native", "tensorflow")
    assert said["not_applicable"] and "Keras has none" in said["message"], said
    said = contract_says(c, "values", "mxnet", whole_framework=True)
    assert said["not_applicable"] and "no such layer" in said["message"], said
    assert contract_says(c, "parameters", "mxnet") is None  # a user's own layer in that framework runs


def test_an_adapters_na_arrives_in_the_record_with_its_reason(tmp_path):
    """flax.nnx's mixed precision needs dtype/param_dtype constructor arguments: the jax adapter, in its
    executor, raises NotApplicable; the wire, the runner, the JSON record and the terminal keep it n/a with the
    reason."""
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "-n", "0", "-rs", "--contract", "rmsnorm", "--framework", "jax",
                      "--impl", "layer_conformance.reference_impls.jax.rmsnorm:IMPL", "--check", "mixed_precision",
                      "--conformance-json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = [r for r in json.loads(out.read_text())["results"] if r["check"] == "mixed_precision"]
    assert len(recs) == 1, recs
    rec = recs[0]
    reason = "the constructor takes no dtype or param_dtype argument"
    assert rec["outcome"] == "skipped" and rec["not_applicable"] is True and reason in rec["message"], rec
    assert f"n/a: {reason}" in proc.stdout, proc.stdout   # pytest's skip line, from the record
