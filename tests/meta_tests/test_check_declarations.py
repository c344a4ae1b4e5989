"""A check is declared once (issue 30 §3): ``layer_conformance.check_catalog.CATALOG`` holds, per check, its
id, module, prerequisites, dtype, device and process behaviour and whether it is opt-in. The tables the
harness reads are derived from it, the contract schema's check ids are filled in from it, and what is
written elsewhere (docs/checks.md's table, the hints' check tags) is held to it here."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from layer_conformance import check_catalog
from layer_conformance.check_catalog import CATALOG, CHECK_IDS, OPT_IN

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
CHECKS_DOC = ROOT / "docs" / "checks.md"


def test_each_check_is_declared_once_and_its_declaration_holds_together():
    assert len(set(CHECK_IDS)) == len(CHECK_IDS), CHECK_IDS
    for spec in CATALOG:
        function = spec.function
        assert function.__name__ == f"check_{spec.id}", spec
        assert function.__module__ == f"layer_conformance.checks.{spec.module}", spec
        assert set(spec.prerequisites) <= set(CHECK_IDS) - {spec.id}, spec
        # a check that blocks another says why in the blocked check's message
        for first in spec.prerequisites:
            assert check_catalog.BLOCKING_REASONS.get(first), f"{spec.id} rests on {first}, which has no blocks_because"


def test_the_tables_are_derived_from_the_catalog():
    """The names the rest of the code reads are the catalog's own objects, not copies written out by hand."""
    from layer_conformance import checks, runner, tolerances
    from layer_conformance.checks import blame
    assert list(checks.CHECKS) == list(CHECK_IDS)
    assert all(checks.CHECKS[s.id] is s.function for s in CATALOG)
    for name in ("DEFAULT_CHECKS", "OPT_IN", "PER_DTYPE", "FRESH_PROCESS", "ALONGSIDE"):
        assert getattr(checks, name) is getattr(check_catalog, name), name
    assert blame.PREREQUISITES is check_catalog.PREREQUISITES
    assert blame.BLOCKING_REASONS is check_catalog.BLOCKING_REASONS
    assert runner.DEVICE_CHECKS is check_catalog.DEVICE_CHECKS
    assert tolerances.GRADIENT_CHECKS is check_catalog.GRADIENT_TOLERANCE_CHECKS
    assert check_catalog.DEFAULT_CHECKS == [c for c in CHECK_IDS if c not in OPT_IN]


def _hint_tags(tree: ast.AST) -> set[int]:
    """The ids of the literals that are a ``Hint(...)``'s check tags (its second argument)."""
    return {id(node.args[1]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Hint" and len(node.args) > 1}


def test_no_other_module_writes_out_a_list_of_checks():
    """A tuple, list or set literal naming three or more check ids outside the catalog is a second table;
    a hint's check tags are not (they are tested below)."""
    ids = set(CHECK_IDS)
    lists = []
    for path in sorted(HARNESS.rglob("*.py")):
        if path.name == "check_catalog.py":
            continue
        tree = ast.parse(path.read_text())
        tags = _hint_tags(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in tags:
                named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in ids]
                if len(named) >= 3:
                    lists.append(f"{path.relative_to(ROOT)}:{node.lineno}: {named}")
    assert not lists, "derive these from layer_conformance.check_catalog:\n" + "\n".join(lists)


def test_the_schema_takes_the_check_ids_from_the_catalog(monkeypatch):
    from layer_conformance import contract
    assert contract.CHECK_IDS == CHECK_IDS
    assert contract.schema()["$defs"]["check_id"]["enum"] == list(CHECK_IDS)
    # the file itself lists none: the catalog is their one owner
    raw = json.loads(contract.SCHEMA_PATH.read_text())
    assert raw["$defs"]["check_id"]["enum"] == []
    assert raw["properties"]["checks"]["propertyNames"] == {"$ref": "#/$defs/check_id"}
    monkeypatch.setattr(check_catalog, "CHECK_IDS", CHECK_IDS + ("made_up",))
    assert contract.schema()["$defs"]["check_id"]["enum"][-1] == "made_up"


def _doc_table() -> list[tuple[str, str]]:
    """(id, what it checks) for each row of docs/checks.md's table under "What each check does"."""
    lines = CHECKS_DOC.read_text().splitlines()
    start = lines.index("## What each check does")
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def test_the_docs_table_has_every_check_in_the_catalogs_order_and_marks_the_opt_in_ones():
    rows = _doc_table()
    assert [cid for cid, _ in rows] == list(CHECK_IDS), "docs/checks.md's table and check_catalog.CATALOG differ"
    for cid, text in rows:
        if cid in OPT_IN:
            assert text.startswith(f"opt-in (`--check {cid}`)"), f"{cid} is opt-in: its row must say so first"
        else:
            assert "opt-in" not in text, f"{cid} runs by default, but its row says opt-in"


def test_every_hint_names_a_declared_check():
    from layer_conformance.checks.mistakes import HINTS
    unknown = {h.id: sorted(set(h.checks) - set(CHECK_IDS)) for h in HINTS.values() if set(h.checks) - set(CHECK_IDS)}
    assert not unknown, f"hints tagged with checks not in check_catalog.CATALOG: {unknown}"
    assert all(h.checks for h in HINTS.values()), [h.id for h in HINTS.values() if not h.checks]


def test_adding_a_check_names_the_catalog():
    section = (ROOT / "docs" / "adding.md").read_text().split("* **Add a check**:", 1)[1].split("\n* **", 1)[0]
    assert "`harness/check_catalog.py`" in section
    assert "`harness/checks/__init__.py`" not in section and "contract.schema.json" not in section
