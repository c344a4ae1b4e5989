"""Fixtures the harness's own tests share (plain helpers and sample data: tests/support.py), and the suite's two
tiers (at the end: which tests are `full`)."""
import ast
import inspect
from functools import lru_cache
from pathlib import Path

import pytest

from tests.support import executor_pythons


@pytest.fixture(scope="session")
def sessions():
    """``sessions(framework)``: one executor Session per framework for every test of this process (an xdist
    worker), closed at its end. Its zygote runs no code under test (each target is checked in a process of its
    own, forked from it), so a module shares nothing with the next but the framework's import, which is the
    costly part (3.3 s for torch, 3.6 s for TensorFlow, per Session)."""
    from layer_conformance.boundary import Session
    made = {}

    def get(framework):
        if framework not in made:
            made[framework] = Session(executor_pythons(framework))
        return made[framework]
    yield get
    for s in made.values():
        s.close()


@pytest.fixture
def session():
    """A plain executor Session (no MXNet environment) for one test, closed after. test_export.py and
    test_hints.py keep module-scoped sessions of their own (with MXNet's python), which override this one."""
    from layer_conformance.boundary.session import Session
    s = Session()
    yield s
    s.close()


# --- the two tiers: `-m "not full"` (fast, run first by scripts/test.sh) and `-m full` (docs/testing.md) --------
#
# A test is in the full tier when (1) its module is one of HEAVY_MODULES, (2) it is marked `full` or `slow` (the
# costly tests the next rule does not see, found with --durations), or (3) the test function, or a fixture it uses,
# starts a nested pytest run: it reaches one of tests/support.py's launchers (pytest_run, pytest_command, gate_run,
# and whatever else in support.py calls them), or starts one itself (subprocess, sys.executable and pytest) or
# makes a venv, directly or through helpers of its own module. FAST_ANYWAY keeps a few such tests in the fast tier,
# each its module's cheapest, so that every module has a fast test; a module without one is in NO_FAST_TEST with
# the reason. tests/meta_tests/test_tiers.py holds every module to that.

_TESTS = Path(__file__).resolve().parent

# modules whose every test is full, with the reason (paths relative to tests/)
HEAVY_MODULES = {
    "test_mutants.py": "the mutant catalogue: every mutant and every bundled reference, run through the executors",
    "test_wheel.py": "builds or reuses a venv per single-extra wheel and runs a user's layer in each",
}

# tests the rules make full kept in the fast tier: the cheapest of their module (seconds on a loaded 2-core machine,
# pytest --durations), so that the module has a fast test
FAST_ANYWAY = {
    "hostile/test_bounds.py::test_the_run_total_is_bounded_too": "collection only",
    "hostile/test_changed_since.py::test_a_binding_the_baseline_has_no_record_of_is_selected": "14 s",
    "hostile/test_excuses.py::test_a_glob_entry_is_a_usage_error_naming_the_file_the_entry_and_the_flag": "1 s",
    "hostile/test_green_gate.py::test_a_message_that_cannot_be_sent_is_not_blocked_by_a_check_that_passed": "11 s",
    "hostile/test_sandbox_tight.py::test_c_another_jobs_tmp_directory_is_not_visible": "4 s",
    "hostile/test_native_dtype.py::test_native_alone_fails_a_layer_that_returns_float64_for_float32_input": "11 s",
    "hostile/test_reference_isolated.py::test_a_user_reference_cannot_rewrite_another_contracts_reference": "17 s",
    "hostile/test_stderr_flood.py::test_a_stderr_flood_stays_out_of_the_terminal_and_is_cut_to_its_tail": "13 s",
    "hostile/test_targets_isolated.py::test_a_patch_of_one_target_does_not_reach_the_next": "15 s",
    "test_arg_map.py::test_constructor_that_cannot_take_the_contract_arguments_is_a_usage_error": "11 s",
    "test_binding_dtypes.py::test_a_dtype_the_contract_does_not_declare_is_a_usage_error": "6 s",
    "test_binding_options.py::test_a_binding_that_does_not_fit_is_one_usage_error_said_once": "13 s",
    "test_extras.py::test_jax_export_without_flatbuffers_is_a_usage_error_naming_it": "12 s",
    "test_mutants.py::test_reference_passes_every_check[torch-rmsnorm]": "17 s: the catalogue's machinery",
    "meta_tests/test_boundary.py::test_a_run_leaves_no_layer_side_module_in_the_judge": "7 s",
    "test_one_failure.py::test_eps_outside_sqrt_fails_once_in_every_dtype[torch]": "9 s",
    "test_plugin.py::test_unknown_framework_and_check_are_usage_errors": "5 s",
    "test_quiet_output.py::test_deselecting_the_checks_on_purpose_is_not_told_again": "3 s",
    "test_reference_self_check.py::"
    "test_a_reference_vjp_that_forgot_a_factor_is_a_contract_error_naming_case_input_and_gap": "11 s",
    "test_user_project.py::test_not_marker_leaves_the_checks_out_without_importing_the_layer": "2 s",
    "meta_tests/test_tiers.py::test_every_test_module_has_a_fast_test_or_is_listed_with_its_reason":
        "a collection, only of the modules this session did not collect",
}

# test modules (paths relative to tests/) without any test in the fast tier, with the reason; every other
# test module has one (tests/meta_tests/test_tiers.py)
NO_FAST_TEST = {
    "test_wheel.py": HEAVY_MODULES["test_wheel.py"],
    "test_readme_examples.py": "its one test reruns the README's examples: four runs of the torch matrix",
    "hostile/test_merge_plan.py": "every test reads the shards of one module fixture: two nested sharded runs",
}

_LAUNCHER_ROOTS = {"pytest_run", "pytest_command", "gate_run"}


def _defs(tree: ast.AST):
    """(name, node) for each function of a module: module-level, and methods of its classes."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node


def _refs(node: ast.AST) -> set[str]:
    """The names a function's body refers to: bare names, and attributes of self, cls and the support module."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls", "support"):
            out.add(n.attr)
    return out


def _starts_python(node: ast.AST) -> bool:
    """Whether a function starts a nested pytest run or makes a venv itself, not through support.py's launchers:
    it uses ``subprocess`` and ``sys.executable`` and names pytest (``-m pytest``, a script that imports it) or
    venv. (``python -m layer_conformance merge ...`` and the like are cheap: no framework is imported.)"""
    attrs = {(n.value.id, n.attr) for n in ast.walk(node)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    texts = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return ("sys", "executable") in attrs and any(mod == "subprocess" for mod, _ in attrs) \
        and any("pytest" in t or t == "venv" for t in texts)


def _reaching(tree: ast.AST, roots: set[str]) -> set[str]:
    """The roots, the module's functions that start python in a subprocess themselves, and those that refer to
    one of them, directly or through one another."""
    uses, found = {}, set(roots)
    for name, node in _defs(tree):
        uses.setdefault(name, set()).update(_refs(node) - {name})
        if _starts_python(node):
            found.add(name)
    grew = True
    while grew:
        grew = False
        for name, used in uses.items():
            if name not in found and used & found:
                found.add(name)
                grew = True
    return found


@lru_cache(maxsize=None)
def launchers() -> frozenset:
    """tests/support.py's functions that start a nested pytest run (the roots and its helpers that call them)."""
    return frozenset(_reaching(ast.parse((_TESTS / "support.py").read_text()), _LAUNCHER_ROOTS))


@lru_cache(maxsize=None)
def _launching(path: str) -> frozenset:
    """The functions of the module at ``path`` that reach a launcher."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(_reaching(tree, set(launchers())))


def _launches(func) -> bool:
    func = inspect.unwrap(func)
    try:
        path = inspect.getsourcefile(func)
    except TypeError:
        return False
    return bool(path) and func.__name__ in _launching(path)


def full_reason(item) -> str | None:
    """Why ``item`` is in the full tier, or None where it is in the fast one."""
    path = Path(str(item.path))
    try:
        rel = path.resolve().relative_to(_TESTS).as_posix()
    except ValueError:
        return None   # not one of the harness's own tests (a conformance check of the repository's specs)
    if item.get_closest_marker("full") is not None:
        return "marked full"
    if item.get_closest_marker("slow") is not None:
        return "marked slow"
    if "::".join([rel, *item.nodeid.split("::")[1:]]) in FAST_ANYWAY:
        return None
    if rel in HEAVY_MODULES:
        return f"heavy module: {HEAVY_MODULES[rel]}"
    func = getattr(item, "function", None)
    if func is not None and _launches(func):
        return f"{func.__name__} starts a nested pytest run (or python in a subprocess)"
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in (info.name2fixturedefs.items() if info else ()):
        for fixturedef in defs:
            if _launches(fixturedef.func):
                return f"its fixture {name} starts a nested pytest run (or python in a subprocess)"
    return None


_CENSUS = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)   # before pytest's own -m and -k deselection
def pytest_collection_modifyitems(config, items):
    census = config.stash.setdefault(_CENSUS, {})
    for item in items:
        reason = full_reason(item)
        if reason is not None and item.get_closest_marker("full") is None:
            item.add_marker(pytest.mark.full(reason=reason))
        try:
            rel = Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()
        except ValueError:
            continue
        census.setdefault(rel, {"fast": 0, "full": 0})["full" if reason else "fast"] += 1
    # the modules with the longest tests first, each kept whole (its module-scoped fixtures are made once): under
    # xdist the last tests handed out are the ones a worker may run alone while the other has nothing left
    first = {m: i for i, m in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(Path(str(item.path)).name, len(first)))


# the modules whose tests take longest (tens of seconds each, pytest --durations), which the tiers start with
LONGEST_FIRST = ("test_wheel.py", "test_zoo.py", "test_sharding.py", "test_readme_examples.py", "test_ci_example.py")


@pytest.fixture
def tiers(request):
    """The tiers' rules for tests/meta_tests/test_tiers.py: ``census`` ({module: {"fast": n, "full": m}} for the
    modules this session collected, before -m and -k), ``no_fast_test``, ``heavy_modules``, ``fast_anyway``,
    ``launchers``."""
    from types import SimpleNamespace
    return SimpleNamespace(census=dict(request.config.stash.get(_CENSUS, {})), no_fast_test=dict(NO_FAST_TEST),
                           heavy_modules=dict(HEAVY_MODULES), fast_anyway=dict(FAST_ANYWAY), launchers=launchers())
