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
    "runs",              # layout: the check's own map of layout -> vjp reply (a Gradients, read by attribute)
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


# the methods whose reply is one reply type (vjp's Gradients, jvp's Tangents, hvp's SecondOrder...)
ONE_REPLY = frozenset(m for m, (_, many) in protocol.REPLIES.items() if not many)


def _reply_call(node) -> str | None:
    """The method's name where ``node`` is a call of a method with one reply type (``adapter.vjp(...)``)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ONE_REPLY:
        return node.func.attr
    return None


def positional_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) of every reply read by position: a call of a ONE_REPLY method (or a name, or a name's item,
    that one was assigned to) unpacked as a tuple (``out, grads, _ = adapter.vjp(...)``) or indexed by a number
    (``adapter.jvp(...)[1]``)."""
    tree = ast.parse(source)
    held = set()   # names (or the containers, ``runs[...] = ...``) a reply was assigned to
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reply_call(node.value):
            for target in node.targets:
                base = target.value if isinstance(target, ast.Subscript) else target
                if isinstance(base, ast.Name):
                    held.add(base.id)

    def reply(value) -> str | None:
        if _reply_call(value):
            return _reply_call(value)
        base = value.value if isinstance(value, ast.Subscript) and not _numbered(value) else value
        return base.id if isinstance(base, ast.Name) and base.id in held else None

    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.NamedExpr)) else []
        value = getattr(node, "value", None)
        if value is not None and any(isinstance(t, (ast.Tuple, ast.List)) for t in targets) and reply(value):
            found.append((node.lineno, f"{reply(value)} unpacked as a tuple"))
        if isinstance(node, ast.Subscript) and _numbered(node) and reply(node.value):
            found.append((node.lineno, f"{reply(node.value)} indexed by position"))
    return found


def _numbered(node: ast.Subscript) -> bool:
    s = node.slice
    return isinstance(s, ast.Constant) and isinstance(s.value, int) or isinstance(s, ast.Slice) or (
        isinstance(s, ast.UnaryOp) and isinstance(s.operand, ast.Constant))


def test_no_check_reads_a_reply_by_position():
    wrong = [f"harness/checks/{path.name}:{line}: {what}" for path in sorted(CHECKS.glob("*.py"))
             for line, what in positional_reads(path.read_text())]
    assert not wrong, "read the reply's fields by name (got.output, got.inputs[i], got.state):\n" + "\n".join(wrong)


@pytest.mark.parametrize("source,bad", [
    ("def f(a):\n    out, grads, _ = a.vjp(1, 2, 3, [0], 4)\n", True),
    ("def f(a):\n    _, (g,), _ = a.compiled_vjp(1, 2, 3, [0], 4)\n", True),
    ("def f(a):\n    return a.jvp(1, 2, [3], [4])[1]\n", True),
    ("def f(a):\n    got = a.hvp(1, 2, 3, [0], 4, 5)\n    return got[0]\n", True),
    ("def f(a):\n    _, g = a.aliased_vjp(1, [2], 0, 1, 3)\n", True),
    ("def f(a):\n    runs = {}\n    runs['c'] = a.layout_vjp(1, 2, 3, [0], 4, 'c')\n    o, g, s = runs['c']\n", True),
    ("def f(a):\n    got = a.vjp(1, 2, 3, [0], 4)\n    return got.output, got.inputs[0], got.state['w']\n", False),
    ("def f(a):\n    runs = {}\n    runs['c'] = a.layout_vjp(1, 2, 3, [0], 4, 'c')\n    return runs['c'].inputs[0]\n",
     False),
    ("def f(a):\n    grads = a.vjp(1, 2, 3, [0], 4).inputs\n    x, = grads\n    return grads[0]\n", False),
])
def test_the_rule_sees_a_reply_read_by_position(source, bad):
    assert bool(positional_reads(source)) is bad


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


def test_typed_reply_passes_the_declared_types_and_says_n_a_as_a_type():
    from layer_conformance.protocol.compile import CompileStats
    from layer_conformance.protocol.shapes import AbstractWay
    ways = [AbstractWay("a", not_applicable=protocol.NotApplicablePart("no symbolic graph", "not_hybrid")),
            AbstractWay("b", shape=(2, 3), dtype="float32")]
    assert protocol.typed_reply("abstract_outputs", ways) == ways  # the types pass as they are
    assert protocol.typed_reply("abstract_outputs", tuple(ways)) == ways  # a tuple of them too, as a list
    assert str(ways[0].not_applicable) == "n/a: no symbolic graph"
    stats = CompileStats(traces=1, graphs=1)
    assert protocol.typed_reply("compile_stats", stats) is stats
    assert protocol.typed_reply("numpy", [1.0]) == [1.0]  # a method without a reply type: untouched


@pytest.mark.parametrize("method,value,said", [
    ("compile_stats", {"traces": 1, "graphs": 1}, "compile_stats returned a dict, not a CompileStats"),
    ("construction_run", [{"part": "p", "problems": []}], "construction_run returned a list whose item 0 is a dict"),
    ("construction_run", {"part": "p"}, "construction_run returned a dict, not a list of ConstructionPart"),
    # the older spellings are gone: an n/a as an "na" key, or as a reason in words where a NotApplicablePart goes
    ("abstract_outputs", [{"way": "a", "na": "no symbolic graph"}], "abstract_outputs returned a list whose item 0"),
    ("vmap_vjp", {"grad_of_vmap": "no rule", "vmap_of_grad": []}, "vmap_vjp returned a dict, not a VmapGrads"),
    ("symbolic_batch", None, "symbolic_batch returned a NoneType, not a SymbolicBatch"),
])
def test_typed_reply_refuses_anything_but_the_declared_type(method, value, said):
    """A layer-side adapter that returns a dict (or a list of them) is caught where the executor answers, naming
    the method."""
    with pytest.raises(TypeError, match=said):
        protocol.typed_reply(method, value)


def test_every_layerside_adapter_returns_the_reply_types_itself():
    """No layer-side area file builds a reply as a dict literal in a method with a declared reply type (the
    executor's ``typed_reply`` no longer converts one)."""
    wrong = []
    for path in sorted((ROOT / "harness" / "layerside").glob("*/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.FunctionDef) and node.name in protocol.REPLIES):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict) and any(isinstance(k, ast.Constant) and k.value in {
                        f.name for f in dataclasses.fields(protocol.REPLIES[node.name][0])} | {"na"}
                        for k in inner.keys):
                    wrong.append(f"{path.relative_to(ROOT)}:{inner.lineno} ({node.name})")
    assert not wrong, "construct the protocol's reply type (harness/protocol/<area>.py):\n" + "\n".join(wrong)


def test_the_remote_adapter_answers_the_protocols_methods_and_no_other():
    from layer_conformance.boundary.remote import RemoteAdapter
    assert "__getattr__" not in vars(RemoteAdapter)
    assert all(callable(getattr(RemoteAdapter, m, None)) for m in protocol.methods())
    assert not hasattr(RemoteAdapter, "no_such_method")
