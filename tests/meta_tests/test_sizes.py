"""Size limits (issue 45): no module of harness/ is over 600 lines and no function over 80, so that each file reads
as one concern and each function fits on a screen. No allow-list: a module or a function over the limit is split.

A function's length runs from its first decorator to its last line, nested functions included (they are part of
what one reads); a class is not a function, its methods are counted one by one."""
import ast

import pytest

from tests.support import ROOT

HARNESS = ROOT / "harness"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules():
    return sorted(HARNESS.rglob("*.py"))


def _functions(tree: ast.AST):
    """(qualified name, lines) of every function and method of a module, nested ones included."""
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                yield f"{prefix}{child.name}", child.end_lineno - first + 1
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)
    yield from walk(tree, "")


def test_the_harness_has_modules_to_measure():
    assert len(_modules()) > 20, HARNESS


def test_no_module_is_over_600_lines():
    over = {p.relative_to(ROOT).as_posix(): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them): {over}"


def test_no_function_is_over_80_lines():
    over = {}
    for path in _modules():
        for name, lines in _functions(ast.parse(path.read_text())):
            if lines > MAX_FUNCTION_LINES:
                over[f"{path.relative_to(ROOT).as_posix()}::{name}"] = lines
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them): {over}"


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    pass\n", {"f": 2}),
    ("class C:\n    @property\n    def g(self):\n        def h():\n            return 1\n        return h\n",
     {"C.g": 5, "C.g.h": 2}),
])
def test_the_measure_counts_decorators_and_nested_functions(source, expected):
    assert dict(_functions(ast.parse(source))) == expected
