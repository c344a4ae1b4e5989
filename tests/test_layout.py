"""The README's "where to add what" lists every file a newcomer touches: each path it names exists
(with <name>, <framework>, <area> read as an existing one), and no file inside harness/ other than
those listed for a framework names the frameworks. The checks share helpers through checks/common.py,
not through one another."""
import ast
import re
from pathlib import Path

from layer_conformance.frameworks import FRAMEWORKS

ROOT = Path(__file__).resolve().parent.parent


def _lists() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index("Where to add what")
    out, current = {}, None
    for line in text[start:].splitlines()[1:]:
        m = re.match(r"^\* \*\*Add a ([a-z ]+)\*\*", line)
        if m:
            current = m.group(1)
            out[current] = []
        elif not line.startswith((" ", "*")) and line.strip() and current:
            break
        if current:
            out[current] += [p for p in re.findall(r"`([^`\s]+)`", line) if "/" in p]
    return out


def _exists(path: str, name: str) -> bool:
    path = path.replace("<framework>", "torch").replace("<area>", "numerics").replace("<name>", name)
    return (ROOT / path.rstrip("/")).exists()


def test_readme_lists_where_to_add_a_framework_a_contract_a_check_and_a_key():
    lists = _lists()
    assert set(lists) == {"framework", "contract", "check", "contract key"}, lists
    for what, paths in lists.items():
        assert paths, what
        example = {"framework": "torch", "contract": "rmsnorm"}.get(what, "torch")
        missing = [p for p in paths if not _exists(p, example)]
        assert not missing, f"add a {what}: the README names paths that do not exist: {missing}"


def test_only_the_listed_files_inside_harness_name_the_frameworks():
    listed = {p.replace("<name>", "*") for p in _lists()["framework"]}
    names = "|".join(map(re.escape, FRAMEWORKS))
    quoted = re.compile(rf"""["']({names})["']""")
    naming = set()
    for path in (ROOT / "harness").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if any(Path(rel).match(p) for p in listed):
            continue
        if any(quoted.search(line) for line in path.read_text().splitlines()
               if not line.lstrip().startswith("#")):
            naming.add(rel)
    assert not naming, f"these name frameworks but are not in the README's framework list: {sorted(naming)}"
    schema = (ROOT / "harness" / "schema" / "contract.schema.json").read_text()
    assert not quoted.search(schema), "the schema lists frameworks: they come from layer_conformance/frameworks.py"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_checks_share_helpers_through_common_and_import_no_private_name_of_one_another():
    checks = ROOT / "harness" / "checks"
    for path in checks.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module not in (None, "base"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from .{node.module}"
    graph = {p.stem: _imports(p) for p in checks.glob("*.py") if p.stem != "__init__"}
    for a, deps in graph.items():
        for b in deps:
            assert a not in graph.get(b, ()), f"checks/{a}.py and checks/{b}.py import each other"
