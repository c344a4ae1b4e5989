"""The contract is data; running code is not loading (issue 30 §2).

Loading and validating a contract imports no executor, runner, adapter or framework and starts no process: the
reference is imported and called only by the run's own step (``reference_check.load_checked``). And every section
is a typed, frozen object whose defaults live in ``contract.py``: a check reads its attributes, never the string
keys of the YAML.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from layer_conformance.frameworks import FRAMEWORKS

HARNESS = Path(__file__).resolve().parents[2] / "harness"

# what loading may not import: the modules that run code, and every framework (its marker and watched modules)
RUNS_CODE = ("layer_conformance.executor", "layer_conformance.runner", "layer_conformance.layerside",
             "layer_conformance.adapters",
             "layer_conformance.reference_run", "layer_conformance.reference_check", "layer_conformance.checks")
FRAMEWORK_MODULES = sorted({"torch", "tensorflow", "jax", "mxnet"} | {f.module for f in FRAMEWORKS.values()}
                           | {m for f in FRAMEWORKS.values() for m in f.watched})
# the audit events of a new process (os.fork, os.posix_spawn, subprocess.Popen, os.system, os.exec*, os.spawn*)
PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "subprocess.Popen",
                  "pty.spawn")

LOAD_EVERY_BUNDLED_CONTRACT = """
import json, sys
started = []
sys.addaudithook(lambda event, args: started.append(event) if event.startswith(%r) else None)
before = set(sys.modules)
from layer_conformance import contract as contract_mod
from layer_conformance.contract import bundled_contracts, load_contract
loaded = []
for name, path in bundled_contracts().items():
    c = load_contract(path)
    for section in %r:   # every section built, as a check reads it
        getattr(c, section)
    for dtype in c.extra_dtypes():
        c.for_dtype(dtype).trainable
    loaded.append(name)
print(json.dumps({"loaded": loaded, "imported": sorted(set(sys.modules) - before), "started": started}))
"""

SECTIONS = ("reference", "constructor", "cases", "trainable", "non_trainable", "gradients", "native", "composition",
            "tolerances", "properties", "modes", "strict_loading", "forward_mode", "second_order", "compiled", "export",
            "mixed_precision", "native_gradients")


def test_loading_every_bundled_contract_imports_nothing_that_runs_code_and_starts_no_process():
    from layer_conformance.contract import bundled_contracts
    code = LOAD_EVERY_BUNDLED_CONTRACT % (PROCESS_EVENTS, SECTIONS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == list(bundled_contracts())
    assert "layer_conformance.contract" in seen["imported"]   # the watch saw the loader's own imports
    running = [m for m in seen["imported"] if m.startswith(RUNS_CODE)]
    frameworks = [m for m in seen["imported"] if m.split(".")[0] in FRAMEWORK_MODULES]
    assert not running, f"loading a contract imported modules that run code: {running}"
    assert not frameworks, f"loading a contract imported framework modules: {frameworks}"
    assert not seen["started"], f"loading a contract started processes: {seen['started']}"


def test_the_loader_names_none_of_them_even_inside_a_function():
    tree = ast.parse((HARNESS / "contract.py").read_text())
    named = [f"line {n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and (n.module or "").split(".")[0] in ("executor", "runner", "layerside", "adapters", "reference_run",
                                                   "reference_check", "checks")]
    assert not named, "\n".join(named)


# --- the checks read attributes ------------------------------------------------------------------------------
# The rule (``section_key_reads``): an expression is *of a section* where it is
#   - ``<contract>.<section>``, <contract> being a name ``contract`` or ``c``, or any ``<x>.contract``
#     (``ctx.contract``, ``self.contract``) or ``<x>.viewed``; <section> one of SECTIONS;
#   - an entry looked up in one by a computed key (``contract.native[ctx.adapter.name]``,
#     ``contract.native.get(framework)``: a framework's or a slot's entry);
#   - ``<of a section> or <default>`` (``(contract.second_order or {})``), ``<of a section> if ... else ...``,
#     ``{**<of a section>, ...}``;
#   - a name assigned one (``spec = ctx.contract.compiled``, ``x := ...``) anywhere in the same function, or bound
#     by a ``for`` over one, its ``.items()`` or ``.values()``, or ``enumerate`` of these
#     (``for slot, spec in contract.trainable.items()``, ``for i, prop in enumerate(props)``).
# Flagged: ``<of a section>.get("key", ...)``, ``<of a section>["key"]`` and ``"key" in <of a section>``
# (``not in`` too), a string literal as the key. It catches, e.g., ``contract.gradients.get("mode", "true")``,
# ``spec.get("max_recompiles")`` after ``spec = ctx.contract.compiled``, ``"function" in spec`` after
# ``spec = ctx.contract.native[fw]``, ``spec["shape"]`` for a slot of ``contract.trainable.items()``. Not caught:
# a section passed to a helper as an argument and read there, and the cases and their inputs, which stay plain
# mappings (``case["inputs"]``).
SCANNED = sorted(HARNESS.glob("checks/*.py")) + [HARNESS / "inputs.py", HARNESS / "tolerances.py",
                                                 HARNESS / "reference_check.py", HARNESS / "runner.py"]
TYPED = frozenset(SECTIONS) - {"constructor", "cases", "native_gradients"}  # the layer's arguments, the cases: mappings


def _is_contract(node) -> bool:
    return (isinstance(node, ast.Name) and node.id in ("contract", "c")) or \
        (isinstance(node, ast.Attribute) and node.attr in ("contract", "viewed"))


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _walk(scope):
    """The nodes of ``scope``: a function's, with the functions nested in it (they see its names); the module's
    own, without its functions (each is a scope of its own)."""
    if isinstance(scope, _FUNCTIONS):
        yield from ast.walk(scope)
        return
    todo = [scope]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS))


class _Scope:
    def __init__(self, fn):
        self.fn, self.names = fn, set()
        while True:   # names bound from names bound from a section, to a fixpoint
            found = set(self._bound())
            if found <= self.names:
                return
            self.names |= found

    def of_section(self, node) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in TYPED and _is_contract(node.value):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return self.of_section(node.values[0])
        if isinstance(node, ast.IfExp):
            return self.of_section(node.body) or self.of_section(node.orelse)
        if isinstance(node, ast.Dict):   # {**contract.trainable, **contract.non_trainable}
            return any(k is None and self.of_section(v) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.Subscript) and not _literal(node.slice):
            return self.of_section(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and not _literal(node.args[0]):
            return self.of_section(node.func.value)
        return False

    def _iterated(self, it) -> bool:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate" and it.args:
            return self._iterated(it.args[0])
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "values") \
                and not it.args:
            return self.of_section(it.func.value)
        return self.of_section(it)

    def _bound(self):
        for node in _walk(self.fn):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None \
                    and self.of_section(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                yield from (t.id for t in targets if isinstance(t, ast.Name))
            if isinstance(node, (ast.For, ast.comprehension)) and self._iterated(node.iter):
                target = node.target
                if isinstance(target, ast.Tuple) and target.elts:
                    target = target.elts[-1]   # for key, entry in ...items()
                if isinstance(target, ast.Name):
                    yield target.id

    def key_reads(self):
        for node in _walk(self.fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and node.args and _literal(node.args[0]) and self.of_section(node.func.value):
                yield node
            elif isinstance(node, ast.Subscript) and _literal(node.slice) and self.of_section(node.value):
                yield node
            elif isinstance(node, ast.Compare) and _literal(node.left) and len(node.ops) == 1 \
                    and isinstance(node.ops[0], (ast.In, ast.NotIn)) and self.of_section(node.comparators[0]):
                yield node


def section_key_reads(source: str) -> list[str]:
    """Every read of a contract section by a string key in ``source``, as 'line N: code'."""
    tree = ast.parse(source)
    scopes = [n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)]
    found = {}
    for scope in [tree] + scopes:
        for node in _Scope(scope).key_reads():
            found[(node.lineno, node.col_offset)] = f"line {node.lineno}: {ast.unparse(node)}"
    return [found[k] for k in sorted(found)]


# what the checks did while the sections were dicts (harness/checks/*.py before issue 30 §2): each is flagged
FORMER_READS = [
    """def f(contract):\n    return contract.gradients.get("mode", "true") != "none"\n""",
    """def f(ctx):\n    spec = ctx.contract.compiled\n    return spec.get("max_recompiles", 2)\n""",
    """def f(ctx):\n    return ctx.contract.export.get("formats")\n""",
    """def f(ctx):\n    return ctx.contract.composition.get("skip")\n""",
    """def f(self):\n    return (self.contract.second_order or {}).get("reference")\n""",
    """def f(ctx):\n    spec = ctx.contract.native[ctx.adapter.name]\n    if "function" in spec:\n        return 1\n""",
    """def f(ctx):\n    spec = ctx.contract.native.get(ctx.adapter.name) or {}\n    return spec.get("args")\n""",
    """def f(contract):\n    for slot, spec in contract.trainable.items():\n        print(spec["shape"])\n""",
    """def f(ctx):\n    spec = ctx.contract.modes\n    train = spec["train"]\n    return train.get("false_alarm")\n""",
    """def f(contract):\n    return [p for p in contract.properties if p.get("after_dense")]\n""",
    """def f(contract):\n    tol = contract.tolerances if contract is not None else {}\n"""
    """    return tol.get("checks")\n""",
    """def f(contract):\n    for name, slot in {**contract.trainable, **contract.non_trainable}.items():\n"""
    """        print(slot["init"])\n""",
    """def f(ctx):\n    props = ctx.contract.properties\n    for i, prop in enumerate(props):\n"""
    """        print(prop["kind"])\n""",
    """f = lambda c, fw: c.mixed_precision["not_applicable"]\n""",
]


@pytest.mark.parametrize("source", FORMER_READS, ids=range(len(FORMER_READS)))
def test_the_rule_flags_a_string_key_read_of_a_section(source):
    assert section_key_reads(source), source


def test_the_rule_passes_attribute_reads():
    assert not section_key_reads(textwrap.dedent("""
        def f(ctx, case):
            spec = ctx.contract.compiled
            native = ctx.contract.native.get(ctx.adapter.name)
            for slot, s in ctx.contract.trainable.items():
                print(s.shape, case["inputs"], ctx.contract.constructor["eps"])
            return spec.max_recompiles, native.args, ctx.contract.tolerances.checks.get("values")
        """))


@pytest.mark.parametrize("path", SCANNED, ids=[str(p.relative_to(HARNESS)) for p in SCANNED])
def test_no_check_reads_a_contract_section_by_a_string_key(path):
    """Catches ``.get("key")``, ``["key"]`` and ``"key" in`` on a contract section (``contract.gradients``,
    ``ctx.contract.compiled``...), on an entry of one (``ctx.contract.native[fw]``, a slot of
    ``contract.trainable``, a property) and on a name bound to either in the same function; the rule in full
    is above ``section_key_reads``. On the checks as they were before the sections were typed it finds 65 reads."""
    reads = section_key_reads(path.read_text())
    assert not reads, f"{path.relative_to(HARNESS.parent)} reads contract sections by key:\n" + "\n".join(reads)
