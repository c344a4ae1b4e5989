"""The contract is data; running code is not loading (issue 30 §2).

Loading and validating a contract imports no executor, runner, adapter or framework and starts no process: the
reference is imported and called only by the run's own step (``reference_check.load_checked``). And every section
is a typed, frozen object whose defaults live in ``contract/sections.py``, and so is each case and each input spec: a check
reads their attributes, never the string keys of the YAML.
"""
from __future__ import annotations

import ast
import functools
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
    trees = {p.name: ast.parse(p.read_text()) for p in sorted((HARNESS / "contract").glob("*.py"))}
    named = [f"{name}: line {n.lineno}: {ast.unparse(n)}" for name, tree in trees.items() for n in ast.walk(tree)
             if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in
             ("executor", "runner", "layerside", "adapters", "reference_run", "reference_check", "checks")]
    assert not named, "\n".join(named)


# --- the checks read attributes ------------------------------------------------------------------------------
# The rule (``section_key_reads``): an expression is *of a section* where it is
#   - ``<contract>.<section>``, <contract> being a name ``contract`` or ``c``, or any ``<x>.contract``
#     (``ctx.contract``, ``self.contract``) or ``<x>.viewed``; <section> one of TYPED (the cases among them);
#   - an entry looked up in one by a computed key (``contract.native[ctx.adapter.name]``,
#     ``contract.native.get(framework)``, ``contract.cases[0]``: a framework's or a slot's entry, a case);
#   - a part of one that is a section or holds them (SUBSECTIONS: ``case.inputs``, ``prop.input``, ``spec.rows``,
#     ``modes.train``...), or a part read by a string key (already flagged itself; followed so that what it
#     holds is too: ``spec`` in ``for name, spec in case["inputs"].items()``);
#   - ``<of a section> or <default>`` (``(contract.second_order or {})``), ``<of a section> if ... else ...``,
#     ``{**<of a section>, ...}``, a copy (``list``, ``tuple``, ``dict``, ``sorted``) of one or of its items;
#   - a name assigned one (``spec = ctx.contract.compiled``, ``x := ...``) anywhere in the same function, or bound
#     by a ``for`` over one, its ``.items()`` or ``.values()``, or ``enumerate`` or ``zip`` of these
#     (``for slot, spec in contract.trainable.items()``, ``for i, (name, spec) in enumerate(case.inputs.items())``);
#   - a parameter of a function that some call passes one to (by position or keyword): a function of the same
#     module called by its name, a method called on ``self``; and, across the scanned modules
#     (``section_key_reads_in``), a function called through its module's import (``inputs_mod.make_input``,
#     ``from .common import helper``) and a method called on any object (``ctx.case_inputs(case)``).
# Flagged: ``<of a section>.get("key", ...)``, ``<of a section>["key"]`` and ``"key" in <of a section>``
# (``not in`` too), a string literal as the key. It catches, e.g., ``contract.gradients.get("mode", "true")``,
# ``spec.get("max_recompiles")`` after ``spec = ctx.contract.compiled``, ``"function" in spec`` after
# ``spec = ctx.contract.native[fw]``, ``spec["shape"]`` for a slot of ``contract.trainable.items()``,
# ``case["name"]`` for a case of ``contract.cases``, and ``spec.get("draw")`` in a helper that a case's input
# spec is passed to. Not caught: a section that reaches a function only through a container or attribute of
# something else (``ctx.first_case``), or a call through a name bound at run time.
SCANNED = sorted(HARNESS.glob("checks/*.py")) + [HARNESS / "inputs.py", HARNESS / "tolerances.py",
                                                 HARNESS / "reference_check.py", HARNESS / "runner.py",
                                                 HARNESS / "reference_run.py", HARNESS / "targets.py"]
TYPED = frozenset(SECTIONS) - {"constructor", "native_gradients"}  # the layer's arguments, and a pair of sets
# the parts of a section that are sections, or hold them by name or position
SUBSECTIONS = frozenset({"inputs", "input", "rows", "train", "worked_examples", "expected"})


def _is_contract(node) -> bool:
    return (isinstance(node, ast.Name) and node.id in ("contract", "c")) or \
        (isinstance(node, ast.Attribute) and node.attr in ("contract", "viewed"))


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


COPIES = ("list", "tuple", "dict", "sorted")   # a copy of a section (or of its items) is one too
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
    def __init__(self, fn, seeds=frozenset()):
        self.fn, self.names = fn, set(seeds)   # seeds: parameters a caller passes a section to
        while True:   # names bound from names bound from a section, to a fixpoint
            found = set(self._bound())
            if found <= self.names:
                return
            self.names |= found

    def of_section(self, node) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in TYPED and _is_contract(node.value):
            return True
        if isinstance(node, ast.Attribute) and node.attr in SUBSECTIONS:
            return self.of_section(node.value)
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return self.of_section(node.values[0])
        if isinstance(node, ast.IfExp):
            return self.of_section(node.body) or self.of_section(node.orelse)
        if isinstance(node, ast.Dict):   # {**contract.trainable, **contract.non_trainable}
            return any(k is None and self.of_section(v) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.Subscript):   # an entry, or a part read by key (flagged there, followed here)
            return self.of_section(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            return self.of_section(node.func.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in COPIES and node.args:
            return self._iterated(node.args[0])   # list(case.inputs.items()), dict(prop.input)
        return False

    def _iterated(self, it) -> bool:
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "zip") + COPIES:
            return any(self._iterated(a) for a in it.args)
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
                # for key, entry in ...items(); for raw, case in zip(...); for i, (name, spec) in enumerate(...)
                yield from (t.id for t in ast.walk(node.target) if isinstance(t, ast.Name))

    def key_reads(self):
        for node in _walk(self.fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and node.args and _literal(node.args[0]) and self.of_section(node.func.value):
                yield node
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _literal(node.slice) \
                    and self.of_section(node.value):
                yield node
            elif isinstance(node, ast.Compare) and _literal(node.left) and len(node.ops) == 1 \
                    and isinstance(node.ops[0], (ast.In, ast.NotIn)) and self.of_section(node.comparators[0]):
                yield node

    def passed(self):
        """(call, argument position or keyword) for each argument of a call in this scope that is of a section."""
        for node in _walk(self.fn):
            if isinstance(node, ast.Call):
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Starred):
                        break
                    if self.of_section(arg):
                        yield node, i
                for kw in node.keywords:
                    if kw.arg is not None and self.of_section(kw.value):
                        yield node, kw.arg


class _Module:
    """One module's functions by name, its methods by name, and the names it imports the scanned modules under."""

    def __init__(self, name: str, source: str):
        self.name, self.tree = name, ast.parse(source)
        self.functions, self.methods = {}, {}
        self.modules, self.imported = {}, {}   # alias -> module name; name -> (module name, its name there)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.methods.setdefault(item.name, []).append(item)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.modules[a.asname or a.name] = a.name   # from .. import inputs as inputs_mod
                    if node.module:
                        self.imported[a.asname or a.name] = (node.module.rsplit(".", 1)[-1], a.name)
        methods = {id(m) for ms in self.methods.values() for m in ms}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) not in methods:
                self.functions.setdefault(node.name, []).append(node)
        self.scopes = [self.tree] + [n for n in ast.walk(self.tree) if isinstance(n, _FUNCTIONS)]


def _callees(modules: dict, module: _Module, call: ast.Call):
    """(function, whether its first parameter is the object it is called on) for what ``call`` may call;
    ``modules``: the scanned modules by their last name (``inputs``, ``common``)."""
    f = call.func
    if isinstance(f, ast.Name):
        yield from ((fn, False) for fn in module.functions.get(f.id, ()))
        if f.id in module.imported:
            other, name = module.imported[f.id]
            if other in modules and modules[other] is not module:
                yield from ((fn, False) for fn in modules[other].functions.get(name, ()))
    elif isinstance(f, ast.Attribute):
        if isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            yield from ((fn, True) for fn in module.methods.get(f.attr, ()))
        elif isinstance(f.value, ast.Name) and module.modules.get(f.value.id) in modules:
            yield from ((fn, False) for fn in modules[module.modules[f.value.id]].functions.get(f.attr, ()))
        elif len(modules) > 1:   # a method called on another object (ctx.case_inputs): any scanned class's
            yield from ((fn, True) for m in modules.values() for fn in m.methods.get(f.attr, ()))


def _parameter(fn, at, bound: bool):
    args = fn.args
    positional = args.posonlyargs + args.args
    if bound:
        positional = positional[1:]
    if isinstance(at, int):
        return positional[at].arg if at < len(positional) else None
    names = [a.arg for a in positional + args.kwonlyargs]
    return at if at in names else None


def section_key_reads_in(sources: dict[str, str]) -> dict[str, list[str]]:
    """Every read of a contract section (a case, an input spec) by a string key in each of ``sources`` (module
    name -> its source), following a section passed to a function of these modules; per module, 'line N: code'."""
    modules = {name: _Module(name, source) for name, source in sources.items()}
    by_stem = {Path(name).stem: m for name, m in modules.items()}
    seeds: dict[int, set] = {}
    while True:   # parameters seeded by the calls that pass a section, to a fixpoint
        scopes = {(name, id(fn)): _Scope(fn, seeds.get(id(fn), ())) for name, m in modules.items() for fn in m.scopes}
        grown = False
        for name, m in modules.items():
            for fn in m.scopes:
                for call, at in scopes[(name, id(fn))].passed():
                    for callee, bound in _callees(by_stem, m, call):
                        param = _parameter(callee, at, bound)
                        if param is not None and param not in seeds.setdefault(id(callee), set()):
                            seeds[id(callee)].add(param)
                            grown = True
        if not grown:
            break
    out = {}
    for name, m in modules.items():
        found = {}
        for fn in m.scopes:
            for node in scopes[(name, id(fn))].key_reads():
                found[(node.lineno, node.col_offset)] = f"line {node.lineno}: {ast.unparse(node)}"
        out[name] = [found[k] for k in sorted(found)]
    return out


def section_key_reads(source: str) -> list[str]:
    """Every read of a contract section by a string key in ``source``, as 'line N: code' (helpers of the same
    module followed)."""
    return section_key_reads_in({"": source})[""]


def _scanned_sources(read) -> dict[str, str]:
    return {str(p.relative_to(HARNESS)): read(p) for p in SCANNED}


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
    # while the cases and their input specs were dicts (before typed-cases)
    """def f(contract):\n    for case in contract.cases:\n        print(case["name"])\n""",
    """def f(ctx):\n    return list(ctx.contract.cases[0]["inputs"])\n""",
    """def f(ctx):\n    for case in ctx.contract.cases:\n"""
    """        print([s.get("shape") for s in case.inputs.values()])\n""",
    """def f(contract):\n    first = contract.cases[0].inputs\n"""
    """    return {n: s["dtype"] for n, s in first.items()}\n""",
    """def f(c):\n    return [x for x in c.cases if "dtypes" in x]\n""",
    """def f(ctx):\n    return ctx.contract.modes.train.input["shape"]\n""",
    """def f(contract):\n    for p in contract.properties:\n        print(p.input.get("draw", "normal"))\n""",
    # ... read in a helper of the same module they are passed to: by position, by keyword, as a method's argument
    """def draw(rng, spec):\n    return spec.get("scale", 1.0)\n\n"""
    """def f(contract):\n    for case in contract.cases:\n        for name, spec in case.inputs.items():\n"""
    """            draw(None, spec)\n""",
    """def helper(x, spec=None):\n    return "value" in spec\n\n"""
    """def f(ctx):\n    return helper(1, spec=ctx.contract.cases[0].inputs["X"])\n""",
    """class Check:\n    def case(self, case):\n        return case["name"]\n\n"""
    """    def run(self):\n        for case in self.contract.cases:\n            self.case(case)\n""",
    """def row(r):\n    return r["draw"]\n\n"""
    """def f(contract):\n    spec = contract.cases[0].inputs["X"]\n    return [row(r) for r in spec.rows]\n""",
]


@pytest.mark.parametrize("source", FORMER_READS, ids=range(len(FORMER_READS)))
def test_the_rule_flags_a_string_key_read_of_a_section(source):
    assert section_key_reads(source), source


def test_the_rule_passes_attribute_reads():
    assert not section_key_reads(textwrap.dedent("""
        def helper(spec, names):
            return spec.draw, names["X"]

        def f(ctx, case):
            spec = ctx.contract.compiled
            native = ctx.contract.native.get(ctx.adapter.name)
            for slot, s in ctx.contract.trainable.items():
                print(s.shape, case.inputs, ctx.contract.constructor["eps"])
            for c in ctx.contract.cases:
                helper(c.inputs[c.name], {"X": 1})
            return spec.max_recompiles, native.args, ctx.contract.tolerances.checks.get("values")
        """))


def test_the_rule_follows_a_section_into_another_scanned_module():
    """A check passes a case's input spec to ``inputs.make_input``, which passes it on to ``_draw``; and a
    case to a method of another module's class (``ctx.case_inputs(case)``)."""
    found = section_key_reads_in({
        "inputs.py": textwrap.dedent("""
            def _draw(rng, spec):
                return spec.get("scale", 1.0)

            def make_input(contract, name, spec, seed):
                return _draw(None, spec)
            """),
        "checks/base.py": textwrap.dedent("""
            class Context:
                def case_inputs(self, case):
                    return case["inputs"]
            """),
        "checks/modes.py": textwrap.dedent("""
            from .. import inputs as inputs_mod
            from ..inputs import make_input

            def check(ctx):
                for case in ctx.contract.cases:
                    ctx.case_inputs(case)
                inputs_mod.make_input(ctx.contract, "modes", ctx.contract.modes.train.input, 0)
            """),
    })
    assert found == {"inputs.py": ["line 3: spec.get('scale', 1.0)"], "checks/base.py": ["line 4: case['inputs']"],
                     "checks/modes.py": []}, found


@functools.lru_cache(maxsize=None)
def _scanned_reads() -> dict:
    return section_key_reads_in(_scanned_sources(lambda p: p.read_text()))


@pytest.mark.parametrize("path", SCANNED, ids=[str(p.relative_to(HARNESS)) for p in SCANNED])
def test_no_check_reads_a_contract_section_by_a_string_key(path):
    """Catches ``.get("key")``, ``["key"]`` and ``"key" in`` on a contract section (``contract.gradients``,
    ``ctx.contract.compiled``...), on an entry or part of one (``ctx.contract.native[fw]``, a slot of
    ``contract.trainable``, a property, a case, its input specs) and on a name bound to either in the same
    function or passed to a function of the scanned modules; the rule in full is above ``section_key_reads``.
    On the checks as they were before the sections were typed (fec44e1) it finds 128 reads (65 of them of the
    sections, all the rule looked for then); on the scanned modules before the cases were typed, HISTORIC_READS."""
    reads = _scanned_reads()[str(path.relative_to(HARNESS))]
    assert not reads, f"{path.relative_to(HARNESS.parent)} reads contract sections by key:\n" + "\n".join(reads)


# The last commit before the cases and input specs were typed, and what the rule finds there, module by module.
BEFORE_TYPED_CASES = "af0dae6a37ecb20b866c1ed508a70a473e2575ce"
HISTORIC_READS = {"checks/compiled.py": 6, "checks/export.py": 2, "checks/forward.py": 7, "checks/functions.py": 15,
                  "checks/mixed_precision.py": 1, "checks/numerics.py": 14, "checks/registration.py": 4,
                  "checks/second_order.py": 2, "inputs.py": 17, "reference_check.py": 9}   # 77


def test_the_rule_finds_the_string_key_reads_of_cases_before_they_were_typed():
    """The rule, run on the scanned modules as they were at BEFORE_TYPED_CASES (from git; skipped outside a
    checkout that has the commit), finds the reads of cases and input specs the checks made then."""
    repo = HARNESS.parent

    def read(path):
        rel = path.relative_to(repo).as_posix()
        done = subprocess.run(["git", "show", f"{BEFORE_TYPED_CASES}:{rel}"], cwd=repo, capture_output=True,
                              text=True)
        return done.stdout if done.returncode == 0 else ""
    try:
        have = subprocess.run(["git", "cat-file", "-e", f"{BEFORE_TYPED_CASES}^{{commit}}"], cwd=repo,
                              capture_output=True).returncode == 0
    except OSError:
        have = False
    if not have:
        pytest.skip(f"no git checkout with {BEFORE_TYPED_CASES[:8]} here")
    found = {name: len(reads) for name, reads in section_key_reads_in(_scanned_sources(read)).items() if reads}
    assert found == HISTORIC_READS, found
