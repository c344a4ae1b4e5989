"""docs/architecture.md's "Layout" is held to the tree (issue 45 §8): every module of harness/ and every package is
listed there, and everything listed there exists, so that the map cannot drift from the code.

How the listing is read (the first code block of the section, from its ``harness/`` line to the next line as far
left): an entry is a line indented two spaces deeper than the folder it is in, starting with one or more names
(``name.py``, ``name/``, single spaces between them) and then, after two spaces or more, its description; a line
indented otherwise (a description's continuation, a ``--`` remark) lists nothing. A folder name opens a folder for
the lines below it. ``<framework>/`` stands for every folder of its parent not listed by name, each of which must
hold the files listed under it. A package's ``__init__.py`` need not be listed (the folder is); other files (the
schema's JSON, a template) need not be either, but what is listed must exist."""
import re
from pathlib import Path

from tests.support import ROOT

DOC = ROOT / "docs" / "architecture.md"
HARNESS = ROOT / "harness"
NAME = r"(?:<\w+>/|[A-Za-z_][\w.-]*/|[A-Za-z_][\w-]*\.py)"
ENTRY = re.compile(rf"^(?P<indent> *)(?P<names>{NAME}(?: {NAME})*)(?: {{2,}}\S.*)?$")


def _layout_block(text: str) -> str:
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```\n", 1)[1].split("```", 1)[0]


def listed_paths(block: str) -> list[str]:
    """The paths (relative to the repository's top, folders ending in '/') the tree listing ``block`` names."""
    out, stack = [], [(-2, "")]   # (indent, folder path) of the open folders
    for line in block.splitlines():
        m = ENTRY.match(line)
        if not m:
            continue
        indent = len(m["indent"])
        while stack[-1][0] >= indent:
            stack.pop()
        if indent != stack[-1][0] + 2:
            continue   # a description's continuation that happens to start with a name
        names = m["names"].split(" ")
        for name in names:
            out.append(stack[-1][1] + name)
        if names[-1].endswith("/"):
            stack.append((indent, stack[-1][1] + names[-1]))
    return out


def _expand(listed: list[str]) -> tuple[set[str], list[str]]:
    """The harness/ paths the listing names, each ``<framework>/`` replaced by every folder of its parent that is
    not listed by name; and the listed paths that match no file or folder."""
    literal = set(listed)
    found, unknown = set(), []
    for path in listed:
        if not path.startswith("harness/"):
            continue
        parts = path.rstrip("/").split("/")
        candidates = [""]
        for i, part in enumerate(parts):
            if part.startswith("<"):
                candidates = [f"{c}{d.name}/" for c in candidates for d in sorted((ROOT / c).iterdir())
                              if d.is_dir() and d.name != "__pycache__" and f"{c}{d.name}/" not in literal]
            else:
                candidates = [f"{c}{part}" + ("/" if i < len(parts) - 1 or path.endswith("/") else "")
                              for c in candidates]
        if not candidates:
            unknown.append(f"{path} (stands for no folder)")
        for c in candidates:
            if (ROOT / c).exists():
                found.add(c)
            else:
                unknown.append(c)
    return found, unknown


def _modules_and_packages() -> set[str]:
    """Every .py file of harness/ but the packages' __init__.py, and every folder holding .py files."""
    out = set()
    for path in HARNESS.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT)
        out.add(f"{rel.parent.as_posix()}/")
        if path.name != "__init__.py":
            out.add(rel.as_posix())
    return out


def test_every_module_and_package_of_the_harness_is_in_the_layout_and_nothing_listed_is_missing():
    listed, unknown = _expand(listed_paths(_layout_block(DOC.read_text())))
    missing = sorted(_modules_and_packages() - listed)
    assert not missing, f"docs/architecture.md's Layout does not list: {missing}"
    assert not unknown, f"docs/architecture.md's Layout lists what the tree lacks: {unknown}"


def test_the_listing_is_read_by_indentation_and_names_only():
    block = (
        "specs/                 contracts\n"
        "harness/\n"
        "  plugin.py            the plugin;\n"
        "                       cli.py in a description's continuation is no entry\n"
        "  boundary/            the judge's side:\n"
        "    client.py session.py   executors\n"
        "  -- shared (a remark):\n"
        "  wire.py              plain data\n"
        "  layerside/\n"
        "    <framework>/       one per framework\n"
        "      core.py\n"
        "reference_impls/\n"
    )
    assert listed_paths(block) == [
        "specs/", "harness/", "harness/plugin.py", "harness/boundary/", "harness/boundary/client.py",
        "harness/boundary/session.py", "harness/wire.py", "harness/layerside/", "harness/layerside/<framework>/",
        "harness/layerside/<framework>/core.py", "reference_impls/"]


def test_a_framework_pattern_stands_for_each_folder_not_listed_by_name():
    found, unknown = _expand(["harness/", "harness/layerside/", "harness/layerside/<framework>/",
                              "harness/layerside/<framework>/__init__.py"])
    folders = {p for p in found if p.count("/") == 3 and p.startswith("harness/layerside/")}
    assert "harness/layerside/torch/" in folders, sorted(found)
    assert "harness/layerside/torch/__init__.py" in found and not unknown, unknown
