"""The layout shows the process boundary (docs/architecture.md, "Layout"): what runs beside the layer is the
package ``layer_conformance.layerside`` (an executor's request loop, the adapters); the judge is the rest of
``harness/``; the few modules both sides import are SHARED, and they import nothing of either side.

Statically (imports at the top or inside a function, relative or absolute, and ``importlib.import_module`` of a
literal or f-string name): no judge module imports the layer side, and the layer side imports of the rest only
SHARED. At run time: a real run through the command line leaves no layer-side module in the judge's
``sys.modules``."""
import ast
import json
import textwrap
from pathlib import Path

import pytest

from layer_conformance.frameworks import FRAMEWORKS, installed
from tests.support import ROOT, pytest_run

HARNESS = ROOT / "harness"
TOP = "layer_conformance"
LAYERSIDE = f"{TOP}.layerside"
# plain data and pure functions both sides import (and the package itself, which holds only its version)
SHARED = {TOP, f"{TOP}.frameworks", f"{TOP}.errors", f"{TOP}.binding", f"{TOP}.wire",
          f"{TOP}.protocol"}
# the protocol: what the judge asks of the layer side, one module per area (standard library and wire only)
PROTOCOL = f"{TOP}.protocol"


def _modules(root: Path) -> dict[str, Path]:
    """Installed module name -> file, for every module under ``root`` (a ``harness/`` folder)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [TOP, *path.relative_to(root).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _literal_prefix(node: ast.AST) -> str | None:
    """A string constant, or an f-string's text before its first field ("layer_conformance.x.{name}" -> its
    package)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value.rstrip(".") or None
    return None


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The harness modules ``module`` imports, each with the packages above it (importing a.b.c runs a.b too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            named.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            named.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names)
        elif isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module"))):
            name = _literal_prefix(node.args[0])
            if name:
                named.add(name)
    out = set()
    for name in named:
        parts = name.split(".")
        out.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1))
                   if p == TOP or p.startswith(TOP + "."))
    return out - {module}


def _side(module: str) -> str:
    if module == LAYERSIDE or module.startswith(LAYERSIDE + "."):
        return "layerside"
    if module.startswith(PROTOCOL + "."):
        return "shared"
    return "shared" if module in SHARED else "judge"


def crossings(root: Path) -> list[str]:
    """Every import across the boundary the layout draws, as "importer -> imported: why"."""
    modules = _modules(root)
    wrong = []
    for module, path in modules.items():
        side = _side(module)
        for imported in sorted(_imports(module, path, set(modules))):
            to = _side(imported)
            if side == "judge" and to == "layerside":
                wrong.append(f"{module} -> {imported}: the judge imports what runs beside the layer")
            elif side == "layerside" and to == "judge":
                wrong.append(f"{module} -> {imported}: the layer side imports the judge (only SHARED may be)")
            elif side == "shared" and to != "shared":
                wrong.append(f"{module} -> {imported}: a shared module imports one side")
    return wrong


def test_no_import_crosses_the_boundary():
    wrong = crossings(HARNESS)
    assert not wrong, "\n".join(wrong)


def test_the_shared_set_is_what_the_layer_side_imports_and_no_more():
    modules = _modules(HARNESS)
    assert SHARED - {TOP} <= set(modules)
    used = {imported for module, path in modules.items() if _side(module) == "layerside"
            for imported in _imports(module, path, set(modules)) if _side(imported) == "shared"}
    used = {m for m in used if not m.startswith(PROTOCOL + ".")}  # the protocol's areas come with the package
    assert used == SHARED, f"shared but not imported by the layer side: {sorted(SHARED - used)}"


def test_the_boundary_check_sees_each_kind_of_crossing(tmp_path):
    root = tmp_path / "harness"
    files = {
        "__init__.py": "",
        "frameworks.py": "",
        "wire.py": "from .boundary import client\n",                              # shared -> judge
        "runner.py": "def f():\n    from .layerside.adapters import base\n",      # judge -> layer side, lazily
        "targets.py": "import importlib\nimportlib.import_module(f'layer_conformance.layerside.adapters.{x}')\n",
        "boundary/__init__.py": "from . import client\n",
        "boundary/client.py": "REMOTE = 'from layer_conformance.layerside.server import serve'\n",  # a string: fine
        "layerside/__init__.py": "",
        "layerside/server.py": "from .. import record\nfrom ..boundary.wire import x\n",   # runs boundary/__init__
        "layerside/adapters/__init__.py": "",
        "layerside/adapters/base.py": "from ...frameworks import y\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert [w.split(":")[0] for w in crossings(root)] == [
        "layer_conformance.layerside.server -> layer_conformance.boundary",
        "layer_conformance.layerside.server -> layer_conformance.boundary.wire",
        "layer_conformance.runner -> layer_conformance.layerside",
        "layer_conformance.runner -> layer_conformance.layerside.adapters",
        "layer_conformance.runner -> layer_conformance.layerside.adapters.base",
        "layer_conformance.targets -> layer_conformance.layerside",
        "layer_conformance.targets -> layer_conformance.layerside.adapters",
        "layer_conformance.wire -> layer_conformance.boundary",
        "layer_conformance.wire -> layer_conformance.boundary.client",
    ]


# a plugin of the user's project: the judge's sys.modules once the run is over (outputs written)
RECORD_MODULES = """\
import json
import sys
from pathlib import Path


def pytest_unconfigure(config):
    Path(__file__).with_name("judge_modules.json").write_text(json.dumps(sorted(sys.modules)))
"""


def test_a_run_leaves_no_layer_side_module_in_the_judge(tmp_path):
    # the quickest framework to import that is here; MXNet lives in its own environment
    here = [f for f in sorted(FRAMEWORKS.values(), key=lambda f: f.start_rank) if f.name != "mxnet"
            and installed(f.name)]
    if not here:
        pytest.skip("no framework installed here")
    fw = here[0].name
    (tmp_path / "conftest.py").write_text(textwrap.dedent(RECORD_MODULES))
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "-n", "0", "--contract", "rmsnorm", "--framework", fw,
                      "--impl", f"layer_conformance.reference_impls.{fw}.rmsnorm:IMPL", "--check", "values",
                      "--dtype", "float32", "--conformance-json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [r["outcome"] for r in json.loads(out.read_text())["results"]] == ["passed"]
    judge = json.loads((tmp_path / "judge_modules.json").read_text())
    assert "layer_conformance.boundary.client" in judge   # the judge's own list: it drove executors
    beside = [m for m in judge if _side(m) == "layerside"]
    assert not beside, f"the judge imported what runs beside the layer: {beside}"
