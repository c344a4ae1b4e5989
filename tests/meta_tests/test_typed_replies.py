"""The wire is typed (issue 45 §1, §3): what a layer-side method returns that has a structure of its own is a reply
type of its protocol area, a frozen dataclass ``wire`` registers and encodes; checks read it by attribute, never by
string key; n/a inside a reply is one typed value (``protocol.NotApplicablePart``), never an "n/a: ..." string.

Statically (ast): no ``x["literal"]`` or ``x.get("literal")`` in ``harness/checks/`` but on the checks' own data
(ALLOWED). Then the protocols: every structured return is a registered reply type, and the wire carries each of them
strictly."""
from __future__ import annotations

import ast
import dataclasses

import pytest

from layer_conformance import protocol, wire
from tests.support import ROOT

CHECKS = ROOT / "harness" / "checks"

# receivers a check may read by string key, each the check's own data or the contract's, never a reply:
ALLOWED = (
    "details",           # the check's details, which it builds itself for the record
    "failure.details",   # a CheckFailed's details (the same, on the failure)
    "runs",              # layout: the check's own map of layout -> vjp result (tuples, read by position)
    "base",              # registration: the check's own map of what it compares -> numpy
    "BLOCKING_REASONS",  # blame: a constant table of the checks' words
    "ctx.contract.",     # the contract: frozen data whose user maps (constructor arguments, tolerance tables) are
                         # read by key (tests/meta_tests/test_contract_is_data.py holds its sections to attributes)
)


def string_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, receiver) of every ``x["literal"]`` and ``x.get("literal", ...)`` whose receiver is not ALLOWED."""
    found = []
    for node in ast.walk(ast.parse(source)):
        receiver = None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value,
                                                                                                    str):
            receiver = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            receiver = node.func.value
        if receiver is None:
            continue
        said = ast.unparse(receiver)
        if not any(said == a or said.startswith(a if a.endswith(".") else a + "[") for a in ALLOWED):
            found.append((node.lineno, said))
    return found


def test_no_check_reads_a_reply_by_string_key():
    wrong = [f"harness/checks/{path.name}:{line}: {said}[...]" for path in sorted(CHECKS.glob("*.py"))
             for line, said in string_key_reads(path.read_text())]
    assert not wrong, "read by attribute (a reply type of harness/protocol/), or allow the check's own data:\n" + \
        "\n".join(wrong)


@pytest.mark.parametrize("source,bad", [
    ("def f(ctx):\n    seen = ctx.adapter.input_changes(1)\n    return seen['forward']\n", True),
    ("def f(ctx):\n    got = ctx.adapter.mixed_precision_run(1)\n    return got.get('notes')\n", True),
    ("def f(w):\n    return w['na'].startswith('n/a')\n", True),
    ("def f(ctx):\n    details = {}\n    details['x'] = 1\n    details['p']['q'] = 2\n    return details\n", False),
    ("def f(ctx):\n    return ctx.contract.constructor['eps'], ctx.adapter.compile_stats(1).traces\n", False),
])
def test_the_rule_sees_a_string_key_read(source, bad):
    assert bool(string_key_reads(source)) is bad


def _return_annotations() -> dict[str, str]:
    return {m: fn.__annotations__["return"] for p in protocol.PROTOCOLS for m, fn in vars(p).items()
            if callable(fn) and not m.startswith("_") and "return" in getattr(fn, "__annotations__", {})}


def test_every_structured_reply_is_a_registered_type():
    """A method returns plain values, a mapping of names (``dict[str, ...]``), a positional tuple, or a reply type;
    a bare ``dict`` (or a list of them) is a structure written only in a docstring."""
    registered = {cls.__name__ for cls in wire.reply_types().values()}
    untyped = {m: said for m, said in _return_annotations().items()
               if said in ("dict", "list[dict]", "tuple[dict, ...]") or said.startswith("list[dict")}
    assert not untyped, f"give these a reply type (harness/protocol/<area>.py, @wire.reply): {untyped}"
    for method, (kind, _) in protocol.REPLIES.items():
        assert kind.__name__ in registered and dataclasses.fields(kind), method
    named = {said.removeprefix("list[").rstrip("]") for said in _return_annotations().values()}
    unused = registered - named - {"NotApplicablePart"}
    assert not unused, f"reply types no protocol method returns: {unused}"


@pytest.mark.parametrize("name", sorted(wire.reply_types()))
def test_each_reply_type_crosses_the_wire_as_itself(name):
    kind = wire.reply_types()[name]
    assert kind.__dataclass_params__.frozen
    value = kind(**{f.name: None for f in dataclasses.fields(kind)})
    assert wire.decode(wire.encode(value, lambda obj: pytest.fail(f"a handle for {obj!r}")), None) == value


def test_the_wire_refuses_an_unknown_type_or_other_fields():
    with pytest.raises(wire.WireError, match="unknown reply type"):
        wire.decode({"__reply__": "compile.Nothing", "fields": []}, None)
    stats = wire.encode(protocol.REPLIES["compile_stats"][0](1, 1), None)
    with pytest.raises(wire.WireError, match="unknown field"):
        wire.decode({**stats, "fields": stats["fields"] + [["extra", 1]]}, None)
    with pytest.raises(wire.WireError, match="missing field"):
        wire.decode({**stats, "fields": stats["fields"][1:]}, None)


def test_typed_reply_is_strict_and_says_n_a_as_a_type():
    ways = protocol.typed_reply("abstract_outputs", [{"way": "a", "na": "no symbolic graph"},
                                                     {"way": "b", "shape": [2, 3], "dtype": "float32"}])
    assert ways[0].not_applicable == protocol.NotApplicablePart("no symbolic graph")
    assert str(ways[0].not_applicable) == "n/a: no symbolic graph" and ways[1].shape == (2, 3)
    assert protocol.typed_reply("abstract_outputs", ways) == ways  # the types pass as they are
    assert protocol.typed_reply("numpy", [1.0]) == [1.0]  # a method without a reply type: untouched
    with pytest.raises(TypeError, match="compile_stats .*'graphs'"):
        protocol.typed_reply("compile_stats", {"traces": 1})
    with pytest.raises(TypeError, match="construction_run .*'problem'"):
        protocol.typed_reply("construction_run", [{"part": "p", "problem": []}])


def test_the_remote_adapter_answers_the_protocols_methods_and_no_other():
    from layer_conformance.boundary.remote import RemoteAdapter
    assert "__getattr__" not in vars(RemoteAdapter)
    assert all(callable(getattr(RemoteAdapter, m, None)) for m in protocol.methods())
    assert not hasattr(RemoteAdapter, "no_such_method")
