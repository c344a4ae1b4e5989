"""docs/contracts.md is the contract authors' reference: it describes every key the schema has, and
nothing the schema lacks, section by section, so that it cannot drift from the loader."""
import re
from pathlib import Path

from layer_conformance.contract import schema
from layer_conformance.frameworks import FRAMEWORKS

DOC = Path(__file__).resolve().parent.parent / "docs" / "contracts.md"
# defined once, where they are documented: other sections refer to them ("the fields of a case input")
SHARED = {"input": "cases"}


def _sections() -> dict[str, str]:
    parts = re.split(r"^## `([a-z_]+)`\s*$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _documented(text: str) -> set[str]:
    return set(re.findall(r"^\s*[-*] `([a-z_]+)`", text, flags=re.M))


def _keys(node, defs, section, seen=()) -> set[str]:
    """Every property name that can appear inside ``node``, following $ref, oneOf, items, maps."""
    if isinstance(node, list):
        return set().union(*(_keys(n, defs, section, seen) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        name = ref.rsplit("/", 1)[1]
        if name in seen or SHARED.get(name, section) != section:
            return set()
        return _keys(defs[name], defs, section, seen + (name,))
    out = set(node.get("properties", {}))
    for key in ("properties",):
        for sub in node.get(key, {}).values():
            out |= _keys(sub, defs, section, seen)
    for key in ("items", "additionalProperties", "oneOf", "anyOf"):
        out |= _keys(node.get(key), defs, section, seen)
    return out


def test_every_section_of_the_schema_has_a_section_here_and_no_other():
    documented, keys = list(_sections()), list(schema()["properties"])
    assert len(documented) == len(set(documented)), "a section is described twice"
    assert sorted(documented) == sorted(keys), (sorted(set(keys) - set(documented)), sorted(set(documented) - set(keys)))


def test_every_key_is_documented_in_its_section_and_every_documented_key_exists():
    s = schema()
    sections = _sections()
    for name, sub in s["properties"].items():
        want, got = _keys(sub, s["$defs"], name), _documented(sections[name])
        assert want - got == set(), f"section {name!r}: keys of the schema not described: {sorted(want - got)}"
        assert got - want == set(), f"section {name!r}: described keys the schema lacks: {sorted(got - want)}"


def test_the_checks_of_the_key_collector_can_fail():
    s = schema()
    assert {"shape", "dtype", "rows", "draw", "differentiable"} <= _keys(s["properties"]["cases"], s["$defs"], "cases")
    assert "shape" not in _keys(s["properties"]["properties"], s["$defs"], "properties")  # input: shared
    assert _documented("- `rtol`: x\n- not a key\n  - `atol`: y\n") == {"rtol", "atol"}


def test_export_formats_named_here_are_the_registrys():
    text = _sections()["export"]
    for f in FRAMEWORKS.values():
        for fmt in f.export_formats:
            assert f"`{fmt}`" in text, fmt
