"""Adding a check touches at most 5 files, and docs/adding.md says how many a check and a framework touch (issue 45
§3, §6).

A check is one ``CheckSpec`` (``harness/check_catalog.py``): its id, module, needs (the protocol methods it calls),
what the contract alone makes n/a, its prerequisites and the rest; the tables, the schema's check ids, applicability
(``checks.applicable``) and the n/a of a framework that lacks a method (``adapter_lacks``) are derived from it. So a
check that uses existing protocol methods touches its module, the catalog, ``mistakes.py`` (its hints),
docs/checks.md (its row) and a mutant file. Held here:
  - no file of ``harness/`` names a check (its id as a string, or ``check_<id>``) beyond its module, the catalog and
    ``mistakes.py``, except the few listed below with why (a new check's id is named in none of them);
  - what a check declares it needs covers the protocol methods it calls;
  - the counts docs/adding.md states are the lengths of the lists below, counted in the tree where they depend on it.
"""
from __future__ import annotations

import ast
import inspect
import re
import textwrap

from layer_conformance.check_catalog import CATALOG
from layer_conformance.contract import bundled_contracts
from layer_conformance.protocol import AREAS, methods
from tests.support import ROOT

HARNESS = ROOT / "harness"
ADDING = ROOT / "docs" / "adding.md"

# the files a check that uses existing protocol methods touches (docs/adding.md, "Add a check")
NEW_CHECK_FILES = ["harness/checks/<area>.py", "harness/check_catalog.py", "harness/checks/mistakes.py",
                   "docs/checks.md", "tests/mutants/<framework>_mutants.py"]

# Where a check's id is named outside its own three files, and why. Folders whose words share the checks' names
# and mean something else: a contract section the check reads (adding one is "Add a contract key"), a protocol area
# or a reply field.
OTHER_MEANING = ("contract/", "protocol/", "layerside/")
# files that name other checks, by id: (the ids, why). A new check is named in none of them.
NAMES_OTHER_CHECKS = {
    "checks/blame.py": ({"parameters", "buffers", "values", "batching", "aliasing", "compiled"},
                        "which check's failure another check's symptom is (the blame rules)"),
    "checks/aliasing.py": ({"values", "gradients"}, "borrows the tolerances of the comparisons it repeats"),
    "checks/layout.py": ({"values", "gradients"}, "borrows the tolerances of the comparisons it repeats"),
    "checks/precision.py": ({"values"}, "borrows the tolerances of the comparison it repeats"),
    "checks/functions.py": ({"native"}, "native's helpers for function contracts: its tolerance"),
    "checks/common.py": ({"native"}, "native's contract location, shared by numerics and functions"),
    "checks/mixed_precision.py": ({"gradients"}, "a reply field of the same name"),
    "compare.py": ({"values"}, "a default word for what is compared"),
    "results.py": ({"devices"}, "the run environment's devices"),
    "binding.py": ({"parameters"}, "a word of a message"),
    "boundary/session.py": ({"native"}, "the executor for native layers"),
    "reference_check.py": ({"properties", "second_order"}, "contract sections of the same names"),
    "scaffold.py": ({"values", "gradients"}, "`new` measures the tolerances these comparisons need"),
    "scaffold_text.py": ({"values"}, "`new` writes those tolerances under the checks' ids"),
}


def _names(tree: ast.AST, ids: set[str]) -> set[str]:
    """The check ids a module names: a string equal to one, or a name ``check_<id>``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in ids:
            out.add(node.value)
        name = getattr(node, "id", None) or getattr(node, "attr", None) or \
            (node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
        if isinstance(name, str) and name.startswith("check_") and name[6:] in ids:
            out.add(name[6:])
    return out


def test_a_check_is_named_only_in_its_module_the_catalog_and_the_hints():
    ids = {c.id for c in CATALOG}
    own = {c.id: {f"checks/{c.module}.py", "check_catalog.py", "checks/mistakes.py"} for c in CATALOG}
    stray = []
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        if rel.startswith(OTHER_MEANING):
            continue
        allowed = NAMES_OTHER_CHECKS.get(rel, (set(), ""))[0]
        for check in _names(ast.parse(path.read_text()), ids):
            if rel not in own[check] and check not in allowed:
                stray.append(f"harness/{rel} names the check {check!r}")
    assert not stray, "derive it from the check's CheckSpec instead:\n" + "\n".join(stray)


def test_the_listed_exceptions_are_still_true():
    """Each listed file still names each of its checks: the list shrinks when the code does."""
    ids = {c.id for c in CATALOG}
    stale = {rel: sorted(named - _names(ast.parse((HARNESS / rel).read_text()), ids))
             for rel, (named, _) in NAMES_OTHER_CHECKS.items() if (HARNESS / rel).exists()}
    assert not {k: v for k, v in stale.items() if v}, stale


def _without_default() -> set[str]:
    """The protocol methods whose body only raises NotImplementedError: a framework may lack them."""
    out = set()
    for protocol in AREAS.values():
        for name, fn in vars(protocol).items():
            if callable(fn) and not name.startswith("_"):
                body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
                body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0]):
                    out.add(name)
    return out


# what every check reads through the context or of any tensor and state, which every framework implements (core)
EVERY_CHECK = {"tensor", "numpy", "is_tensor", "dtype_name", "device_of", "trainable", "non_trainable", "untracked",
               "serialized_state"}


def _called(module: ast.Module, start: str, wanted: set[str]) -> set[str]:
    """The ``wanted`` methods called (as ``x.method``, or named as a string) by ``start`` and the functions of the
    same module it calls, by name, transitively."""
    functions = {f.name: f for f in ast.walk(module) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen, todo, used = set(), [start], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Attribute) and node.attr in wanted:
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and node.value in wanted:
                used.add(node.value)
            elif isinstance(node, ast.Name) and node.id in functions:
                todo.append(node.id)
    return used


def test_a_check_declares_the_protocol_methods_it_calls():
    """A check's ``needs`` names protocol methods, and covers each method a framework may lack that the check calls
    beyond what ``CheckContext`` calls and every check reads: where an adapter lacks one, the check is n/a from
    the catalog, said before it runs (``checks.applicable.adapter_lacks``), never a failure halfway."""
    base = ast.parse((HARNESS / "checks" / "base.py").read_text())
    through_context = {n.attr for n in ast.walk(base) if isinstance(n, ast.Attribute)}
    optional = _without_default() - through_context - EVERY_CHECK
    undeclared = {}
    for spec in CATALOG:
        assert set(spec.needs) <= set(methods()), (spec.id, set(spec.needs) - set(methods()))
        module = ast.parse((HARNESS / "checks" / f"{spec.module}.py").read_text())
        missing = _called(module, f"check_{spec.id}", optional) - set(spec.needs)
        if missing:
            undeclared[spec.id] = sorted(missing)
    assert not undeclared, f"add these to the checks' CheckSpec.needs: {undeclared}"


def _stated(what: str) -> int:
    """The number docs/adding.md states in "**A new <what>** touches N files"."""
    m = re.search(rf"\*\*A new {what}\*\* touches (\d+) files", ADDING.read_text())
    assert m, f"docs/adding.md states no count for a new {what}"
    return int(m.group(1))


def _framework_files() -> list[str]:
    """What a new framework touches, counted in the tree: its layer-side folder has torch's file set, its reference
    layers one file per bundled contract."""
    folder = sorted(p.name for p in (HARNESS / "layerside" / "torch").glob("*.py"))
    references = ["__init__.py"] + [f"{name}.py" for name in bundled_contracts()]
    return (["harness/frameworks.py", "harness/checks/mistakes.py", "harness/check_catalog.py",
             "harness/import_paths.py"]
            + [f"harness/layerside/<name>/{f}" for f in folder]
            + [f"reference_impls/<name>/{f}" for f in references] + ["tests/mutants/<name>_mutants.py"])


def test_the_stated_counts_are_the_files_a_check_and_a_framework_touch():
    assert _stated("check") == len(NEW_CHECK_FILES) <= 5
    section = ADDING.read_text().split("* **Add a check**:", 1)[1].split("\n* **", 1)[0]
    assert re.findall(r"^  - `([^`]+)`", section, re.M) == NEW_CHECK_FILES, section
    harness_only = [f for f in _framework_files() if f.startswith("harness/")]
    assert _stated("framework") == len(_framework_files()), _framework_files()
    m = re.search(r"\*\*A new framework\*\* touches \d+ files: (\d+) in `harness/`", ADDING.read_text())
    assert m and int(m.group(1)) == len(harness_only), harness_only
