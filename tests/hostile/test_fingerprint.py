"""The executor's own code is checked (layer_conformance/layerside/fingerprint.py). A layer that, in its forward,
replaces the adapter's method that runs it, ``wire.encode``, a server operation, or that operation's ``__code__``
(tests/hostile/patches_executor.py) had its wrong output reported halved, and passed `values`; one that also
broke the end-of-check operation passed with a note that the executor "could not be reset". The executor now
fingerprints its own code before the first request and compares after each: such a check is an error naming
what was replaced, the run exits 1, and a correct layer in the same run is unaffected. Run through the public
command line, as a user does."""
import json
import sys
import types

import pytest

from tests.support import ROOT, pytest_run

ATTACKS = {
    "ReplacesAdapterMethod": "layer_conformance.layerside.torch.FrameworkAdapter.call replaced (by "
                             "ReplacesAdapterMethod.patch.<locals>.halving_call at ",
    "ReplacesWireEncode": "layer_conformance.wire.encode replaced (by ReplacesWireEncode.patch.<locals>.halving_encode at ",
    "ReplacesServerOp": "layer_conformance.layerside.server.Server.op_call replaced (by "
                        "ReplacesServerOp.patch.<locals>.halving_op_call at ",
    "SwapsCode": "layer_conformance.layerside.server.Server.op_call: its code replaced (at <string>:2)",
    # the end-of-check answer is part of the check: one that fails, or says nothing of the code, makes it an error
    "BreaksEndOfCheck": "layer_conformance.wire.encode replaced (by ReplacesWireEncode.patch.<locals>.halving_encode "
                        "at ",
    "ForgesEndOfCheck": "its end-of-check answer says nothing of its code",
}
CORRECT = "layer_conformance.reference_impls.torch.rmsnorm:IMPL"


def test_a_layer_that_replaces_the_executors_code_gets_an_error_naming_it(tmp_path):
    pytest.importorskip("torch")
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text("".join(f'- {{contract: rmsnorm, impl: "tests.hostile.patches_executor:{a}"}}\n'
                                for a in ATTACKS) + f'- {{contract: rmsnorm, impl: "{CORRECT}"}}\n')
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "-n", "0", "--bindings", str(bindings), "--framework", "torch", "--check", "values",
                      "--check", "parameters", "--dtype", "float32", "--conformance-json", str(out),
                      "--rootdir", str(ROOT), cwd=ROOT, timeout=600)
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.exists(), said
    records = json.loads(out.read_text())["results"]
    by = {(r["impl"].rpartition(":")[2] if "patches_executor" in r["impl"] else r["impl"], r["check"]): r
          for r in records}
    for attacker, names in ATTACKS.items():
        rec = by[(attacker, "values")]
        assert rec["outcome"] == "error", (attacker, rec)
        assert rec["message"].startswith("the executor's own code was changed by the code under test: "), rec
        assert names in rec["message"], (attacker, rec["message"])
    assert "(and it did not answer the end of the check: RuntimeError: nothing to report)" in \
        by[("BreaksEndOfCheck", "values")]["message"]
    for check in ("values", "parameters"):
        rec = by[(CORRECT, check)]
        assert rec["outcome"] == "passed", rec
        assert "own code" not in json.dumps(rec), rec
    assert proc.returncode == 1, said


def _server():
    """A server object as a layer executor holds it (no channel, torch's adapter), without its start-up."""
    pytest.importorskip("torch")
    from layer_conformance.layerside import server
    from layer_conformance.layerside import get_adapter
    s = server.Server.__new__(server.Server)
    s.adapter, s.channel, s.role = get_adapter("torch"), None, "layer"
    return s


def _probe(*, x=1):
    return x


def _closure():
    value = 1

    def inner():
        return value
    return inner


@pytest.mark.parametrize("how", ["keyword default", "closure", "instance method", "sys.modules", "errors helper",
                                 "deleted", "undone before the end", "base class"])
def test_each_kind_of_change_is_seen(how, monkeypatch):
    """In this process: each way of changing what the executor's code does is named, a function changed without
    being replaced in its module included; one undone before the end of the check is still named, having been
    seen between requests."""
    from layer_conformance import errors, wire
    from layer_conformance.layerside import fingerprint
    s = _server()
    adapter_cls = type(s.adapter)
    rec = fingerprint.take(s)
    inner = _closure()
    fingerprint._function(rec, "probe", _probe)
    fingerprint._function(rec, "closure", inner)
    rec.freeze()
    assert fingerprint.ended(rec) == []
    if how == "keyword default":
        monkeypatch.setitem(_probe.__kwdefaults__, "x", 2)
        want = "probe: its keyword defaults changed"
    elif how == "closure":
        inner.__closure__[0].cell_contents = 2
        want = "closure: a variable of its closure changed"
    elif how == "instance method":
        monkeypatch.setattr(s.adapter, "numpy", lambda t: None, raising=False)
        want = f"{adapter_cls.__module__}.FrameworkAdapter.numpy replaced on the adapter (by "
    elif how == "sys.modules":
        monkeypatch.setitem(sys.modules, "layer_conformance.wire", types.ModuleType("layer_conformance.wire"))
        want = "sys.modules['layer_conformance.wire'] replaced"
    elif how == "errors helper":
        monkeypatch.setattr(errors, "unexpected_error", lambda exc: "nothing to see")
        want = "layer_conformance.errors.unexpected_error replaced (by "
    elif how == "deleted":
        monkeypatch.delattr(wire, "array_to_bytes")
        want = "layer_conformance.wire.array_to_bytes deleted"
    elif how == "undone before the end":
        monkeypatch.setattr(wire, "decode", lambda value, object_of: value)
        fingerprint.seen(rec)  # between two requests
        monkeypatch.undo()
        want = "layer_conformance.wire.decode replaced (by "
    else:
        bases = adapter_cls.__bases__
        adapter_cls.__bases__ = (type("Evil", bases, {}),)
        want = f"{adapter_cls.__module__}.FrameworkAdapter: its base classes changed"
    found = fingerprint.ended(rec)
    monkeypatch.undo()
    if how == "closure":
        inner.__closure__[0].cell_contents = 1
    if how == "base class":
        adapter_cls.__bases__ = bases
    assert any(want in f for f in found), (want, found)
    assert fingerprint.ended(rec) == [], "put back, nothing is named at the next check"


def test_a_correct_layers_forward_changes_nothing_it_watches():
    """Nothing is named where nothing changed: torch's own first-use work (a forward, a backward, the adapter's
    calls) reaches nothing the fingerprint watches."""
    torch = pytest.importorskip("torch")
    from layer_conformance.layerside import fingerprint
    s = _server()
    rec = fingerprint.take(s)
    layer = torch.nn.Linear(4, 4)
    layer(torch.ones(2, 4)).sum().backward()
    s.adapter.numpy(s.adapter.call(layer, [torch.ones(2, 4).numpy()]))
    fingerprint.seen(rec)
    assert fingerprint.ended(rec) == []


def test_a_patch_in_a_checks_fresh_process_is_seen(tmp_path):
    """export loads the saved layer in a fresh process, whose answers decide the check as much as the layer
    executor's: a patch there is an error of that check (and the layer executor's checks are unaffected)."""
    pytest.importorskip("torch")
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "-n", "0", "--contract", "rmsnorm", "--impl", "tests.hostile.patches_executor:PatchesFreshProcess",
                      "--framework", "torch", "--check", "values", "--check", "export", "--dtype", "float32",
                      "--conformance-json", str(out), "--rootdir", str(ROOT), cwd=ROOT, timeout=600)
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.exists(), said
    by = {r["check"]: r for r in json.loads(out.read_text())["results"]}
    assert by["values"]["outcome"] == "passed", by["values"]
    assert by["export"]["outcome"] == "error", by["export"]
    assert "the executor's own code was changed by the code under test: layer_conformance.wire.encode replaced (by " \
           "PatchesFreshProcess.forward.<locals>.same_encode at " in by["export"]["message"], by["export"]
    assert proc.returncode == 1, said
