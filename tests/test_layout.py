"""docs/adding.md's "where to add what" lists every file a newcomer touches: each path it names exists
(with <name>, <framework>, <area> read as an existing one), and no file inside harness/ other than
those listed for a framework names the frameworks. The checks share helpers through checks/common.py,
not through one another. The README stays a short guide (at most README_MAX_BYTES), and every relative link of
the README and of docs/*.md reaches an existing file and, where it names one, an existing heading."""
import ast
import re
from pathlib import Path

from layer_conformance.frameworks import FRAMEWORKS

ROOT = Path(__file__).resolve().parent.parent
ADDING = ROOT / "docs" / "adding.md"
README_MAX_BYTES = 15_000


def _lists() -> dict[str, list[str]]:
    """The lists under docs/adding.md's heading "Where to add what", up to the next heading."""
    lines = ADDING.read_text().splitlines()
    start = lines.index("## Where to add what")
    out, current = {}, None
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        m = re.match(r"^\* \*\*Add an? ([a-z ]+)\*\*", line)
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


def test_adding_lists_where_to_add_a_framework_a_contract_a_check_a_key_and_an_output():
    lists = _lists()
    assert set(lists) == {"framework", "contract", "check", "contract key", "output format"}, lists
    for what, paths in lists.items():
        assert paths, what
        example = {"framework": "torch", "contract": "rmsnorm", "output format": "json"}.get(what, "torch")
        missing = [p for p in paths if not _exists(p, example)]
        assert not missing, f"add a {what}: docs/adding.md names paths that do not exist: {missing}"


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
    assert not naming, f"these name frameworks but are not in docs/adding.md's framework list: {sorted(naming)}"
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


def test_the_readme_is_a_short_guide():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size} bytes, over {README_MAX_BYTES}: move reference material into docs/ and link it")


FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code removed."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not - and _), spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().replace("`", "").lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    out, seen = set(), {}
    fenced = False
    for line in path.read_text().splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _links(path: Path) -> list[str]:
    return [target for line in _prose(path.read_text()) for target in LINK.findall(line)]


def test_every_relative_link_reaches_a_file_and_its_heading():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken, checked = [], 0
    for doc in documents:
        for target in _links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, https:, mailto: ...
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            where = f"{doc.relative_to(ROOT).as_posix()}: ({target})"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where}: no heading with that anchor in {dest.name}")
    assert checked, "no relative links found: the link collector is broken"
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_checker_can_fail(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n## The `x` key, and more\n\n```\n## not a heading\n```\n[b](b.md) `[c](c.md)`\n")
    assert _anchors(doc) == {"title", "the-x-key-and-more"}
    assert _links(doc) == ["b.md"]
