"""The suite's own shape: no test module imports another test module or conftest.py. What tests share lives in
tests/support.py (plain helpers, constants, sample data) or as fixtures in tests/conftest.py; data modules that
are not tests (tests/hostile/torch_hostile.py, tests/mutants/, tests/zoo/, ...) may be imported."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def _file(name: str, importer: Path) -> Path | None:
    """The file of module ``name`` as seen from ``importer``: a module of the ``tests`` package, or one found
    beside the importer (pytest's rootdir-style imports, such as a bare ``import conftest``)."""
    parts = name.split(".")
    bases = [ROOT] if parts[0] == "tests" else [importer.parent, TESTS]
    for base in bases:
        path = base.joinpath(*parts)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _is_test_module(path: Path | None) -> bool:
    return path is not None and (path.name == "conftest.py" or (path.name.startswith("test_") and path.suffix == ".py"))


def _package(path: Path) -> list[str]:
    """The dotted package of a file under tests/, as a list: tests/hostile/x.py -> ['tests', 'hostile']."""
    return list(path.resolve().relative_to(ROOT).parent.parts)


def _imported(node: ast.AST, path: Path) -> list[str]:
    """The module names an import statement (or an ``import_module("...")`` / ``__import__("...")`` call with a
    literal name) may bring in: for ``from M import a``, both M and M.a (a may be a submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            package = _package(path)
            base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        return [module] + [f"{module}.{a.name}" for a in node.names if a.name != "*"]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__"):
            return [node.args[0].value]
    return []


def offending_imports(source: str, path: Path) -> list[str]:
    """'FILE:LINE imports MODULE (...)' for each import in ``source`` (the text of ``path``) of a test module or
    conftest.py."""
    out = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        for name in _imported(node, path):
            target = _file(name, path)
            if _is_test_module(target) and target != path.resolve():
                kind = "conftest.py" if target.name == "conftest.py" else "a test module"
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name} ({kind}, "
                           f"{target.relative_to(ROOT)})")
                break
    return out


def test_no_test_module_imports_another_or_conftest():
    files = sorted(TESTS.rglob("test_*.py"))
    assert len(files) > 40, files   # the walk found the suite
    problems = [p for f in files for p in offending_imports(f.read_text(), f)]
    assert not problems, ("a test module imports another test module or conftest.py; move what they share to "
                          "tests/support.py (plain helpers and data) or to a fixture in tests/conftest.py:\n  "
                          + "\n  ".join(problems))


def test_the_check_sees_every_form_of_such_an_import():
    here = TESTS / "hostile" / "test_example.py"   # need not exist: only its package matters
    caught = {
        "from tests.test_plugin import pytest_run": "tests.test_plugin",
        "import tests.test_report": "tests.test_report",
        "from tests import test_wheel": "tests.test_wheel",
        "from ..conftest import executor_pythons": "tests.conftest",
        "from .. import test_gate_holes": "tests.test_gate_holes",
        "from .test_bounds import HOSTILE": "tests.hostile.test_bounds",
        "import conftest": "conftest",
        "def f():\n    from tests.test_plugin import USER_LAYER": "tests.test_plugin",
        "import importlib\nimportlib.import_module('tests.test_junit')": "tests.test_junit",
    }
    for source, module in caught.items():
        (problem,) = offending_imports(source, here)
        assert problem.startswith("tests/hostile/test_example.py:") and f" imports {module} (" in problem, problem
    allowed = ["from tests.support import pytest_run, USER_LAYER", "from tests.hostile import torch_hostile as H",
               "from . import torch_hostile", "from .torch_hostile import OffByTwo", "import tests.mutants.catalogue",
               "from tests.zoo.torch_layers import upcast_rmsnorm_grad_scaled", "from pathlib import Path"]
    for source in allowed:
        assert offending_imports(source, here) == [], source
