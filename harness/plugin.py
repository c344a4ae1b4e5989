"""The pytest plugin: options, contract files as collectors, one item per check, results.

Node ids read like the domain and are identical on every xdist worker:
``specs/rmsnorm.yaml::rmsnorm[torch-cpu]::serialization``.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import pytest

from . import __version__
from . import import_paths
import_paths.guard_early()   # before numpy or yaml: a numpy.py beside the run is never imported here (exit 4 below)
from .frameworks import FRAMEWORKS
from .nodeids import parse as parse_nodeid, target_name
from .record import Record
from .contract import (CONTRACT_ELEMENTS_PER_INPUT, DEFAULT_MAX_INPUT_ELEMENTS, MAX_CONTRACT_ELEMENTS_ENV,
                       MAX_INPUT_ELEMENTS_ENV, MAX_RUN_ELEMENTS_ENV, MAX_TIMEOUT, RUN_ELEMENTS_PER_INPUT,
                       ContractError, ContractNotFound, ElementBudget, input_element_limit)

from .exitcodes import EXIT_CONTRACT_ERROR  # every exit code's number is defined there
from . import hookspecs, outputs


def pytest_addoption(parser):
    g = parser.getgroup("conformance", "layer conformance")
    g.addoption("--contract", action="append", default=[], metavar="NAME|PATH",
                help="contract to check (a bundled name or a YAML path); repeatable")
    g.addoption("--impl", metavar="MODULE:ATTR", help="the class, factory or function under test")
    g.addoption("--framework", action="append", default=[], metavar="NAME",
                help=f"{'|'.join(FRAMEWORKS)} (detected from --impl when omitted); repeatable")
    g.addoption("--device", choices=["cpu", "cuda", "all"], default=None,
                help="devices the checks run on (default cpu; the devices check also uses virtual devices)")
    g.addoption("--state-map", action="append", default=[], metavar="SLOT=NAME",
                help="map a contract state slot onto the layer's own name, e.g. gain=weight")
    g.addoption("--arg-map", action="append", default=[], metavar="ARG=NAME",
                help="map a contract constructor argument onto the layer's own, e.g. d=dim")
    g.addoption("--dtype", action="append", default=[], metavar="NAME",
                help="run only these of a contract's dtypes (the cases' own always runs); repeatable")
    g.addoption("--bindings", metavar="FILE",
                help="YAML list of {contract, impl[, framework, state_map, arg_map, dtypes]}")
    g.addoption("--changed-since", metavar="REV",
                help="with --bindings: only the entries whose implementation, a module it imports, its contract or "
                     "its bindings entry changed since REV")
    g.addoption("--seed", type=int, default=None, help="seed for every drawn input (default 0)")
    g.addoption("--check", action="append", default=[], metavar="ID", help="run only these check ids")
    g.addoption("--memory-limit", type=float, default=None, metavar="GIB",
                help="memory cap per process running checks (default 8 GiB; 0 lifts it)")
    g.addoption("--sandbox", choices=["auto", "require", "off"], default="auto",
                help="run executors in Linux namespaces and a cgroup: auto (where they can be had), require (a usage "
                     "error where not), off")
    g.addoption("--keep-warm", action="store_true", default=False,
                help="keep each framework's zygote (its import, no user code) running after the run, for the next "
                     "one (--keep-warm-for); `python -m layer_conformance warm --stop` ends them")
    g.addoption("--keep-warm-for", type=_warm_seconds, default=None, metavar="SECONDS",
                help="with --keep-warm: how long a kept zygote waits for the next run (default 600)")
    g.addoption("--check-timeout", type=_timeout_seconds, default=None, metavar="SECONDS",
                help="per-check timeout (default: the contract's `timeout`, else 60 s)")
    g.addoption("--compile-backend", default=None, metavar="NAME",
                help="torch.compile backend for the compiled check (default aot_eager; inductor: the full compiler)")
    g.addoption("--executor-python", action="append", default=[], metavar="FRAMEWORK=PYTHON",
                help="the Python that runs a framework's executors, e.g. mxnet=.venv-mxnet/bin/python "
                     "(default: this one)")
    g.addoption("--untrusted-tree", metavar="PATH", default=None,
                help="a gate: the tree under test (a pull request's checkout) is PATH, imported only in the layer "
                     "executors; the working directory is a trusted checkout (conftest.py, contracts, bindings, "
                     "expectations, baseline)")
    g.addoption("--max-input-elements", type=_element_count, default=None, metavar="N",
                help=f"largest input a contract may draw, in elements (default {DEFAULT_MAX_INPUT_ELEMENTS}, "
                f"or ${MAX_INPUT_ELEMENTS_ENV})")
    g.addoption("--max-contract-elements", type=_element_count, default=None, metavar="N",
                help=f"most elements a contract's drawn inputs may have together (default {CONTRACT_ELEMENTS_PER_INPUT} "
                     f"times the per-input limit, or ${MAX_CONTRACT_ELEMENTS_ENV})")
    g.addoption("--max-run-elements", type=_element_count, default=None, metavar="N",
                help=f"most elements all the run's contracts' drawn inputs may have together (default "
                     f"{RUN_ELEMENTS_PER_INPUT} times the per-input limit, or ${MAX_RUN_ELEMENTS_ENV})")
    for name, kind, help_ in [
        ("conformance_contract", "linelist", "default --contract values"),
        ("conformance_impl", "string", "default --impl"),
        ("conformance_framework", "linelist", "default --framework values"),
        ("conformance_device", "string", "default --device"),
        ("conformance_state_map", "linelist", "default --state-map values"),
        ("conformance_arg_map", "linelist", "default --arg-map values"),
        ("conformance_dtype", "linelist", "default --dtype values"),
        ("conformance_bindings", "string", "default --bindings"),
        ("conformance_seed", "string", "default --seed"),
        ("conformance_executor_python", "linelist", "default --executor-python values"),
        ("conformance_compile_backend", "string", "default --compile-backend"),
        ("conformance_default_run", "bool", "run the bundled matrix when pytest gets no file arguments"),
    ]:
        parser.addini(name, help_, type=kind, default=None if kind != "bool" else False)
    outputs.addoption(g, parser)   # each output's options (--conformance-json, --conformance-html): layer_conformance.outputs


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)   # pytest_conformance_verdict: the gate's verdict, asked once


def _keep_warm(config) -> float | None:
    """--keep-warm's seconds (None: nothing outlives the run)."""
    from .boundary.warm import DEFAULT_SECONDS
    seconds = config.getoption("keep_warm_for", None)
    if seconds is not None and not config.getoption("keep_warm", False):
        raise pytest.UsageError("--keep-warm-for is the time a kept zygote waits: give it with --keep-warm")
    return (seconds or DEFAULT_SECONDS) if config.getoption("keep_warm", False) else None


def _warm_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= 86400):
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds above 0 and at most 86400 (a day)")
    return value


def _timeout_seconds(text: str) -> float:
    """--check-timeout: 0, a negative number, inf or nan would silently leave checks without a timeout."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(f"{text!r}: a timeout is a number of seconds above 0 and at most "
                                         f"{MAX_TIMEOUT:g} ({MAX_TIMEOUT / 60:g} minutes, a contract's `timeout:` "
                                         f"ceiling too); 0, negative, inf and nan are refused")
    return value


def _element_count(text: str) -> int:
    try:
        return input_element_limit(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number of elements") from None


def option(config, name, ini):
    """An option's value: the command line's, else the ini file's ``ini`` (public: the gate reads it too)."""
    value = config.getoption(name)
    if value in (None, [], ""):
        value = config.getini(ini)
    return value


def _arg_paths(config) -> list[Path]:
    """The collection arguments as resolved paths (``tests/test_x.py::test_a[1]`` -> tests/test_x.py)."""
    base = config.invocation_params.dir
    return [(base / str(a).split("::", 1)[0]).resolve() for a in config.args]


def _covers(paths, target: Path) -> bool:
    return any(p == target or p in target.parents for p in paths)


def _markexpr_selects_conformance(config) -> bool:
    """Whether ``-m`` can select an item that carries only the conformance markers."""
    expr = config.getoption("markexpr", "")
    if not expr:
        return True
    try:
        # pytest's own -m evaluation (no public API for it); on any change there, plan as usual
        from _pytest.mark import MarkMatcher
        from _pytest.mark.expression import Expression
        marks = [pytest.mark.conformance.mark, pytest.mark.xdist_group.mark]
        return bool(Expression.compile(expr).evaluate(MarkMatcher.from_markers(marks)))
    except Exception:
        return True


# --- the judge before user code -------------------------------------------------------------------------------
# Everything the judge (this process: pytest, the plugin, the gate, the reports) imports after user code may have
# run: imported before any does (detection included). tests/hostile/test_judge_first.py checks that this list
# covers every import inside a function of the judge's modules.
JUDGE_MODULES = (
    "ml_dtypes", "jinja2", "markupsafe", "jsonschema", "numpy", "yaml", "execnet",
    "ast", "atexit", "concurrent.futures", "fcntl", "fnmatch", "re", "hashlib", "importlib.metadata", "inspect", "json", "resource",
    "secrets", "shlex", "signal", "site", "stat", "subprocess", "tempfile", "textwrap", "threading",
    "importlib.machinery", "ctypes", "ctypes.util",  # ctypes: the stderr file's hole punching (boundary.client)
    "_pytest.junitxml", "_pytest.mark", "_pytest.mark.expression",
    *(f"layer_conformance.{m}" for m in (
        "binding", "changed", "check_catalog", "checks", "checks.applicable", "checks.base", "checks.blame", "checks.common", "checks.mistakes",
        "checks.properties", "compare", "contract", "dtypes", "errors", "boundary", "boundary.cgroup", "boundary.client",
        "boundary.procfs", "boundary.session", "boundary.warm", "frameworks", "gate", "gate.expectations", "gate.hooks", "inputs",
        "hookspecs", "lane", "nodeids", "outputs", "outputs.base", "outputs.html", "outputs.json", "outputs.junit",
        "outputs.terminal", "record", "reference_check", "reference_run", "report", "report.html", "reproduce",
        "results", "verdict", "runner", "scheduling", "targets", "tolerances", "wire")),
)
# top-level names the judge (or pytest's plugins in it, hypothesis's) may import that are not the standard library's
GUARDED = {"ml_dtypes", "jinja2", "markupsafe", "jsonschema", "jsonschema_specifications", "referencing", "rpds",
           "attr", "attrs", "numpy", "yaml", "_yaml", "execnet", "xdist", "pytest", "_pytest", "pluggy", "iniconfig",
           "packaging", "hypothesis", "_hypothesis_pytestplugin", "sortedcontainers", "exceptiongroup",
           "typing_extensions", "layer_conformance"}


def _trusted_roots() -> list[str]:
    import site
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    try:
        roots.add(site.getusersitepackages())
    except AttributeError:   # a virtualenv's site module
        pass
    return sorted({os.path.realpath(r) for r in roots if r})


class JudgeImportGuard:
    """A meta path finder (first on ``sys.meta_path`` of the judge): a module of the standard library or one of
    GUARDED is imported from the Python installation alone (its prefixes and site-packages), never from the current
    directory or any other sys.path entry outside it (``python -m pytest`` puts the current directory first, and
    code under test can write files there). Where the installation has no such module and only a file outside it
    does, the import is refused with an ImportError that names the file."""

    def __init__(self):
        self.roots = _trusted_roots()
        # and the import directories the interpreter was given (.pth files, PYTHONPATH) outside the current
        # directory: the installation's configuration, not a place the code under test writes to
        cwd = os.path.realpath(os.getcwd())
        self.roots = sorted(set(self.roots) | {
            os.path.realpath(p) for p in sys.path
            if p and os.path.isdir(p) and not (os.path.realpath(p) + os.sep).startswith(cwd + os.sep)})

    def trusted(self, path) -> bool:
        real = os.path.realpath(path or os.getcwd())
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery as machinery
        top = fullname.partition(".")[0]
        if path is not None or "." in fullname or not (top in GUARDED or (top in sys.stdlib_module_names
                                                                          and top not in ("test", "tests"))):
            return None   # a submodule is found inside its (already guarded) package
        if machinery.BuiltinImporter.find_spec(fullname) or machinery.FrozenImporter.find_spec(fullname):
            return None
        spec = machinery.PathFinder.find_spec(fullname, [p for p in sys.path if self.trusted(p)])
        if spec is not None:
            return spec
        other = machinery.PathFinder.find_spec(fullname)
        if other is not None:
            where = other.origin if other.has_location else list(other.submodule_search_locations or [])
            raise ImportError(f"layer conformance: refused to import {fullname!r} from {where}: outside the Python "
                              f"installation, where code under test may have written it (the judge imports the "
                              f"standard library and its own dependencies from the installation only)",
                              name=fullname)
        return None


def _guard_imports(config=None):
    """The judge imports the names of GUARDED and the standard library from the installation only. With the run's
    ``config`` (before any executor starts): the tree under test is set (--untrusted-tree, else the working
    directory), and outside --untrusted-tree a file beside the run that shadows a module the judge, a zygote or a
    framework imports refuses the run (exit 4, naming it)."""
    if config is not None:
        _import_tree(config)
    if not any(isinstance(f, JudgeImportGuard) for f in sys.meta_path):
        sys.meta_path.insert(0, JudgeImportGuard())


def _import_tree(config):
    path = config.getoption("untrusted_tree", None)
    if not path:
        import_paths.configure(None)
        # what was there as the plugin was imported, and what pytest added to sys.path since (rootdir, pythonpath)
        found = list(dict.fromkeys(import_paths.EARLY + import_paths.shadows()))
        if found:
            raise pytest.UsageError(import_paths.refusal(found))
        return
    tree = _untrusted_tree_of(path)
    import_paths.configure(tree)
    # never on the judge's own import path (a .pth file or PYTHONPATH naming it included)
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p and _is_within(os.path.realpath(p), tree))]


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _untrusted_tree_of(path: str) -> str:
    """--untrusted-tree's directory, resolved; a usage error where it cannot be one."""
    tree = os.path.realpath(path)
    if not os.path.isdir(tree):
        raise pytest.UsageError(f"--untrusted-tree {path}: not a directory")
    if _is_within(os.path.realpath(os.getcwd()), tree):
        raise pytest.UsageError(f"--untrusted-tree {path}: the working directory is inside it; run from a trusted "
                                f"checkout (the base branch) and give the tree under test as a directory of its own")
    return tree


class _IgnoreTree:
    """(--untrusted-tree) pytest collects nothing in the tree under test, so it loads no conftest.py there."""

    def __init__(self, tree: str):
        self.tree = tree

    def pytest_ignore_collect(self, collection_path, config):
        return True if _is_within(os.path.realpath(collection_path), self.tree) else None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """--untrusted-tree: before pytest loads any conftest.py, a file argument inside the tree under test, or a tree
    named where pytest looks for initial conftests (test* beside an argument), is a usage error; and the tree is
    never collected."""
    path = getattr(early_config.known_args_namespace, "untrusted_tree", None)
    if not path:
        return
    tree = _untrusted_tree_of(path)
    anchors = [os.path.realpath(a.split("::")[0]) for a in early_config.known_args_namespace.file_or_dir or []]
    for a in anchors:
        if _is_within(a, tree):
            raise pytest.UsageError(f"--untrusted-tree {path}: the argument {a} is inside it; the judge collects "
                                    f"nothing from the tree under test")
    for anchor in anchors + [os.path.realpath(str(early_config.invocation_params.dir))]:
        if _is_within(tree, anchor) and tree != anchor and \
                os.path.relpath(tree, anchor).split(os.sep)[0].startswith("test"):
            raise pytest.UsageError(f"--untrusted-tree {path}: pytest loads the conftest.py of a directory named "
                                    f"test* beside its arguments; give the tree under test another name (pr/)")
    early_config.pluginmanager.register(_IgnoreTree(tree), "layer-conformance-untrusted-tree")


def _judge_first():
    """Before any user code runs: guard the names the judge imports, then import what it may need."""
    import importlib
    _guard_imports()
    for name in JUDGE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass   # an optional dependency not installed (ml_dtypes without bfloat16): the guard covers its name


class ConformanceRun:
    """Per-process state of the plugin (one per pytest config)."""

    def __init__(self, config):
        from . import targets as targets_mod
        from .checks import CHECKS, DEFAULT_CHECKS

        self.config = config
        contracts = list(option(config, "contract", "conformance_contract") or [])
        impl = option(config, "impl", "conformance_impl") or None
        bindings = option(config, "bindings", "conformance_bindings") or None
        frameworks = list(option(config, "framework", "conformance_framework") or [])
        device = option(config, "device", "conformance_device") or "cpu"
        seed = option(config, "seed", "conformance_seed")
        self.json_path = option(config, "conformance_json", "conformance_json") or None
        self.seed = int(seed) if seed not in (None, "") else 0
        self.devices = {"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu", "cuda"]}[device]
        self.checks = list(config.getoption("check") or DEFAULT_CHECKS)  # opt-in checks only when named
        unknown = [c for c in self.checks if c not in CHECKS]
        if unknown:
            raise pytest.UsageError(f"--check {', '.join(unknown)}: known checks are {', '.join(CHECKS)}")
        explicit = bool(contracts or impl or bindings or frameworks or self.json_path
                        or config.getoption("check") or config.getoption("device"))
        files_given = config.args_source == pytest.Config.ArgsSource.ARGS
        from_command_line = bool(config.getoption("impl") or config.getoption("bindings"))
        if from_command_line:
            wanted = True                        # asked for on the command line: always
        elif impl or bindings:
            # set in the project's ini: part of a whole-project run (no file arguments, or the rootdir
            # among them), not of `pytest tests/test_x.py` or an IDE running one test
            wanted = not files_given or _covers(_arg_paths(config), config.rootpath)
        else:
            wanted = not files_given and (explicit or config.getini("conformance_default_run"))
        # `-m "not conformance"` (or any expression no conformance item can satisfy): nothing is planned,
        # so no implementation is imported and no framework loaded
        self.active = wanted and _markexpr_selects_conformance(config)
        # the ini file names a layer, and the files given leave its checks out: the summary says so, once
        self.left_out = bool((impl or bindings) and not wanted and _markexpr_selects_conformance(config))
        # a conformance run alone (the fast path: only contract files are collected) unless the user's
        # own tests are part of this run too
        self.alone = not files_given and (from_command_line or not (impl or bindings))
        self.targets = []
        self.results: list[Record] = []
        self._session = None
        self.kept: list[dict] = []  # the zygotes this run leaves running for the next (--keep-warm)
        self.lane = None  # with -n 0, the second lane the ALONGSIDE checks run on (layer_conformance.lane)
        self.planned: list[str] | None = None   # node ids of every conformance check this run will execute
        self.journal = None
        self.interrupted: str | None = None     # the signal that ended the run early
        self.inputs = None                      # the files read before any user code ran (targets.Inputs)
        self.changed: list[str] = []            # those that changed during the run: it is refused (exit 4)
        # (contract, impl, framework) -> {"files", "truncated"}: what each binding's processes saw its code load,
        # from the reports (an xdist worker's too); the results file's `loaded_files`
        self.loaded_files: dict = {}
        self.files_sent: dict = {}              # (contract, framework, spec) -> files already on a report
        if not self.active:
            return
        # the executors started below end with the config however it ends: a usage or contract error raised
        # before the session ends them (pytest runs no sessionfinish then), without waiting for a framework import
        config.add_cleanup(self.close)
        max_elements = config.getoption("max_input_elements")
        if max_elements is not None:
            # processes started from here (xdist workers, executors) load contracts with the same limit
            os.environ[MAX_INPUT_ELEMENTS_ENV] = str(max_elements)
        for name, env in (("max_contract_elements", MAX_CONTRACT_ELEMENTS_ENV), ("max_run_elements", MAX_RUN_ELEMENTS_ENV)):
            if config.getoption(name, None) is not None:
                os.environ[env] = str(config.getoption(name))
        try:
            self.max_input_elements = input_element_limit(max_elements)
            # the drawn elements of each contract, and of all of them in this run (ContractFile loads count once)
            self.budget = ElementBudget(config.getoption("max_contract_elements", None),
                                        config.getoption("max_run_elements", None), self.max_input_elements)
        except ValueError as exc:  # a malformed environment variable
            raise pytest.UsageError(str(exc)) from None
        from .boundary import sandbox as sandbox_mod
        self.keep_warm = _keep_warm(config)
        if self.keep_warm:
            sandbox_mod.keep_shared()   # before the sandbox is probed: its shared directory outlives the run too
        try:  # before any executor starts (a binding's framework is detected in one)
            self.sandbox = sandbox_mod.configure(config.getoption("sandbox"))
        except sandbox_mod.Unavailable as exc:
            raise pytest.UsageError(str(exc)) from None
        # The judge before user code: its imports guarded, and the files it decides by read and hashed, before
        # any executor starts (one imports from the current directory, which code under test may write to); what
        # the judge may import is imported before the detection below imports any layer.
        _guard_imports(config)
        try:
            expectations = config.getoption("expectations", None) or config.getini("conformance_expectations")
        except ValueError:   # the gate's options are not registered
            expectations = None
        self.inputs = targets_mod.read_inputs(contracts, bindings, expectations or None)
        try:
            self.pythons = targets_mod.parse_pythons(option(config, "executor_python", "conformance_executor_python"),
                                                     str(config.rootpath))
        except targets_mod.UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.runs_checks = not (_is_worker(config) or config.getoption("numprocesses", None)
                                or config.option.collectonly)
        if self.runs_checks:
            # contract validation asks the references first, and waits for them: their executor (numpy only, a
            # fraction of a second) starts before any framework import, which executors start one at a time
            from .boundary.session import prestart_references
            prestart_references()
        if self.runs_checks and frameworks:
            # frameworks named on the command line: their zygotes (each a framework import, and no user code)
            # start now, so that the import overlaps the judge's own imports, validation and collection
            self.session.prestart(sorted(dict.fromkeys(f for f in frameworks if f in FRAMEWORKS), key=start_rank),
                                  forks=False)
        _judge_first()
        try:
            state_map = targets_mod.parse_state_map(option(config, "state_map", "conformance_state_map"))
            arg_map = targets_mod.parse_arg_map(option(config, "arg_map", "conformance_arg_map"))
            self.compile_backend = option(config, "compile_backend", "conformance_compile_backend") or None
            changed_since = config.getoption("changed_since")
            self.targets = targets_mod.plan(contracts, impl, bindings, frameworks, state_map, arg_map=arg_map,
                                            changed_since=changed_since, pythons=self.pythons,
                                            baseline_loaded=_baseline_loaded(config) if changed_since else None,
                                            changed_since_ignore=_changed_since_ignore(config),
                                            zygote_of=self._zygote_of if self.runs_checks else None)
        except targets_mod.UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        except ContractNotFound as exc:
            raise pytest.UsageError(str(exc)) from None
        except ContractError as exc:
            pytest.exit(str(exc), returncode=EXIT_CONTRACT_ERROR)
        changed = self.inputs.changed()   # written by a layer while detection imported it
        if changed:
            raise pytest.UsageError("\n".join(changed))
        if self.runs_checks:
            # this process runs every check: its executors start now on a background thread, in the order the
            # targets need them, so that a framework's import overlaps validation, collection and earlier checks
            self.session.prestart(sorted(dict.fromkeys(t.framework for t in self.targets), key=start_rank))
        self.by_path: dict[str, list] = {}
        for t in self.targets:
            self.by_path.setdefault(str(Path(t.contract_path).resolve()), []).append(t)
        self.paths = sorted(self.by_path)
        # every planned contract is validated now, so a broken one is reported before collection
        # each loaded, then its reference run against itself (the step that runs code, in the reference executor)
        from .reference_check import load_checked
        self.contracts, broken = {}, []
        for path in self.paths:
            try:
                self.contracts[path] = load_checked(path, self.max_input_elements, self.budget,
                                                    raw=self.inputs.raw(path))   # as read before any user code
            except ContractError as exc:
                broken.append(str(exc))
        if broken:
            pytest.exit("\n".join(broken), returncode=EXIT_CONTRACT_ERROR)
        from .dtypes import FLOATS
        self.dtypes = list(option(config, "dtype", "conformance_dtype") or [])
        unknown = [d for d in self.dtypes if d not in FLOATS]
        if unknown:
            raise pytest.UsageError(f"--dtype {', '.join(unknown)}: known dtypes are {', '.join(FLOATS)}")
        for t in self.targets:
            contract = self.contracts[str(Path(t.contract_path).resolve())]
            declared = [contract.default_dtype] + contract.extra_dtypes()
            unknown = [d for d in (t.dtypes or ()) if d not in declared]
            if unknown:
                raise pytest.UsageError(f"binding {t.impl} -> {contract.name}: dtypes {', '.join(unknown)} are not "
                                        f"among the contract's ({', '.join(declared)})")
        # a binding that does not fit its layer's constructor: said once, before any check runs (exit 4)
        misfits = targets_mod.binding_problems(self.targets, self.contracts)
        if misfits:
            self.close()  # the executors started above
            raise pytest.UsageError("\n".join(misfits))
        # The contracts' directories become collection arguments and pytest_ignore_collect passes only the
        # contract files inside them: given files as arguments, pytest re-collects a file's whole directory
        # once per file argument (quadratic in contracts). pytest collects a path reached twice once.
        self.path_set = set(self.paths)
        self.ancestors = {str(a) for p in self.paths for a in Path(p).parents}
        dirs = sorted({str(Path(p).parent) for p in self.paths})
        self.contract_dirs = [Path(d) for d in dirs if not any(str(a) in dirs for a in Path(d).parents)]
        # the user's own collection arguments (files, directories, testpaths), collected as usual
        self.user_paths = [] if self.alone else _arg_paths(config)
        config.args[:] = ([] if self.alone else list(config.args)) + [str(d) for d in self.contract_dirs]

    @property
    def session(self):
        """The executors that run the code under test (started on first use, in this process)."""
        if self._session is None:
            from .boundary import Session
            from .runner import DEFAULT_MEMORY_LIMIT_GIB
            limit = self.config.getoption("memory_limit")
            self._session = Session(self.pythons, DEFAULT_MEMORY_LIMIT_GIB if limit is None else limit,
                                    self.config.getoption("sandbox"), keep_warm=getattr(self, "keep_warm", None))
        return self._session

    def _zygote_of(self, framework: str):
        """The run's zygote of ``framework`` (started already where --framework named it)."""
        if framework not in FRAMEWORKS:
            return None
        return self.session._executor(self.session.zygotes, "zygote", framework)

    def close(self):
        if self.lane is not None:
            self.lane.close()
            self.lane = None
        if self._session is not None:
            self.kept += self._session.kept()
            self._session.close()
            self._session = None

    def target_nodes(self, key: str, contract):
        """(target, node name, device, dtype, implementation label) of every target node the contract file
        ``key`` holds: a target on each device, in the cases' own dtype (None) and each added one it runs."""
        mine = self.by_path.get(key, [])
        labels = [t.impl_label for t in mine]
        for t in mine:
            impl = t.impl_label
            if labels.count(impl) > 1:
                impl = t.impl.replace(":", ".")
            extra = contract.extra_dtypes()
            wanted = t.dtypes if t.dtypes is not None else (self.dtypes or None)
            if wanted is not None:
                extra = [d for d in extra if d in wanted]  # the cases' own dtype always runs
            for device in self.devices:
                for dtype in [None] + extra:
                    name = target_name(contract.name, None if t.bundled else impl, t.framework, device, dtype)
                    yield t, name, device, dtype, impl

    def checks_of(self, target, contract, dtype):
        """(check, why it can never run there, or None) for each check of a target node, decided from the contract
        (a bundled target in a framework the contract is not for, then layer_conformance.checks.applicable)."""
        from .checks import PER_DTYPE
        from .checks.applicable import contract_says
        for check in self.checks:
            if dtype is not None and check not in PER_DTYPE:
                continue
            said = contract_says(contract, check, target.framework, whole_framework=target.bundled or not target.impl)
            if not target.impl and not (said and said["not_applicable"]):   # (a contract that did not load)
                said = {"not_applicable": True, "message": f"not applicable in {target.framework}: None"}
            # n/a only: a check the contract skips (checks.<id>.skip) is collected, and the runner skips it
            yield check, said["message"] if said and said["not_applicable"] else None

    def not_applicable(self) -> list[Record]:
        """The n/a records of the checks that are never collected: the matrix shows them, with their reason."""
        out = []
        for key in self.paths:
            contract = self.contracts[key]
            file_id = _file_nodeid(self.config, Path(key), self.contract_dirs)
            for t, name, device, dtype, _ in self.target_nodes(key, contract):
                out += [target_record(self, t, contract, device, dtype, check, outcome="skipped", message=reason,
                                      nodeid=f"{file_id}::{name}::{check}", not_applicable=True,
                                      na_source="contract")
                        for check, reason in self.checks_of(t, contract, dtype) if reason]
        return out

    def rerun_options(self, framework: str) -> dict:
        """The options beyond its binding's a record of ``framework`` ran with, for its reproduction command."""
        # the limits too: a check that timed out or ran out of memory under them must do so again
        limits = (("check_timeout", self.config.getoption("check_timeout")),
                  ("memory_limit", self.config.getoption("memory_limit")),
                  ("max_input_elements", self.config.getoption("max_input_elements")))
        return {k: v for k, v in (("compile_backend", self.compile_backend),
                                  ("executor_python", self.pythons.get(framework)), *limits) if v is not None}

    def frameworks(self) -> dict:
        from .frameworks import versions
        out = {}
        for fw in sorted({t.framework for t in self.targets}):
            out.update(versions(fw, getattr(self, "pythons", {}).get(fw)))
        return out


    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session, exitstatus):
        """Before the gate's verdict and any results file: the contracts, bindings and expectations are still the
        bytes read before any user code ran, else the run is refused (exit 4, each changed file named)."""
        if self.active and self.inputs is not None and not _is_worker(session.config):
            self.changed = self.inputs.changed()
            if self.changed:
                session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return (yield)

    def pytest_runtest_logreport(self, report):
        """Every check's record, as its report arrives (from this process or from an xdist worker).
        A hook of the run itself (registered per config): the hook gets no config to find the run by."""
        if not self.active:
            return
        record = getattr(report, "conformance", None)
        if record is None and report.failed and report.when in ("call", "???") and "crashed" in str(report.longrepr):
            # an xdist worker died inside this check (abort, segfault): the check is lost, the run goes on
            record = _record_for_lost_check(self, report)
        if record is not None:
            self.results.append(record)
            if self.journal is not None:
                self.journal.record(record)
            loaded = getattr(report, "conformance_files", None)
            if isinstance(loaded, dict) and isinstance(loaded.get("files"), list):
                entry = self.loaded_files.setdefault((record.contract, record.impl, record.framework),
                                                     {"files": set(), "truncated": False})
                entry["files"].update(f for f in loaded["files"] if isinstance(f, str))
                entry["truncated"] = entry["truncated"] or bool(loaded.get("truncated"))


_RUN_KEY = pytest.StashKey[ConformanceRun]()


def current_run(config) -> ConformanceRun | None:
    """This config's conformance run when it is active (it plans and runs checks), else None."""
    run = config.stash.get(_RUN_KEY, None)
    return run if run is not None and run.active else None


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a layer conformance check")
    outputs.configure(config)   # JUnit's names (layer_conformance.outputs.junit)
    run = ConformanceRun(config)
    config.stash[_RUN_KEY] = run
    config.pluginmanager.register(run, "layer-conformance-run")  # its logreport hook collects the records
    if run.active and not _is_worker(config):
        _stop_on_sigterm(run)
    # one framework's checks on one xdist worker, so a worker imports each framework once
    if run.active and getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
    # workers re-parse the original command line, so tell them about loadgroup explicitly
    if run.active and getattr(config, "workerinput", {}).get("conformance_loadgroup"):
        config.option.loadgroup = True


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    if node.config.getoption("dist") == "loadgroup":
        node.workerinput["conformance_loadgroup"] = True


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    run = config.stash.get(_RUN_KEY, None)
    if run and run.active and config.getoption("dist") == "loadgroup":
        from .scheduling import FrameworkGroupScheduling
        return FrameworkGroupScheduling(config, log)
    return None


def pytest_report_header(config):
    run = config.stash.get(_RUN_KEY, None)
    if not run or not run.active:
        return None
    lines = [f"layer conformance {__version__}: seed {run.seed}, devices {','.join(run.devices)}, "
             f"{len(run.targets)} target(s)"]
    for t in run.targets:
        # the resolved implementation: where its module was imported from (asked of an executor)
        where = f" from {t.file}" if t.file and not t.bundled else ""
        lines.append(f"  {Path(t.contract_path).name}: {t.impl or '(not applicable)'} [{t.framework}]{where}")
    versions = run.frameworks()
    if versions:
        lines.append("  frameworks: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return lines


def pytest_ignore_collect(collection_path, config):
    run = config.stash.get(_RUN_KEY, None)
    if not run or not run.active:
        return None
    path = str(collection_path)
    if path in run.path_set or path in run.ancestors:
        return None
    resolved = collection_path.resolve()
    if str(resolved) in run.path_set or str(resolved) in run.ancestors:
        return None
    # the user's own tests are collected as pytest would without this plugin
    if run.user_paths and (_covers(run.user_paths, resolved) or any(resolved in u.parents for u in run.user_paths)):
        return None
    # anything else is reached only through a contract directory added for the contract files in it
    return True if run.alone or _covers(run.contract_dirs, resolved) else None


def pytest_collect_file(file_path, parent):
    run = parent.config.stash.get(_RUN_KEY, None)
    if run and run.active and str(file_path.resolve()) in run.path_set:
        return ContractFile.from_parent(parent, path=file_path)
    return None


class ContractFile(pytest.File):
    def collect(self):
        run = self.config.stash[_RUN_KEY]
        key = str(self.path.resolve())
        from .reference_check import load_checked
        contract = run.contracts.get(key) or load_checked(self.path, run.max_input_elements, run.budget,
                                                          raw=run.inputs.raw(self.path))
        for t, name, device, dtype, impl in run.target_nodes(key, contract):
            yield TargetNode.from_parent(self, name=name, target=t, contract=contract, device=device,
                                         impl_label=impl, dtype=dtype)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ContractError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class TargetNode(pytest.Collector):
    """One target: an implementation on a framework and device, in the cases' own dtype (``dtype`` None)
    or in one the contract's ``dtypes`` adds, where it holds only the per-dtype checks."""

    def __init__(self, *, target, contract, device, impl_label, dtype=None, **kw):
        super().__init__(**kw)
        self.target, self.contract, self.device, self.impl_label = target, contract, device, impl_label
        self.dtype = dtype

    def collect(self):
        from .check_catalog import RUN_ORDER
        run = self.config.stash[_RUN_KEY]
        said = sorted(run.checks_of(self.target, self.contract, self.dtype),
                      key=lambda c: RUN_ORDER.index(c[0]) if c[0] in RUN_ORDER else len(RUN_ORDER))
        for check, not_applicable in said:
            if not_applicable:
                continue   # no item for what can never run: the results show it n/a (ConformanceRun.not_applicable)
            item = ConformanceItem.from_parent(self, name=check, check=check)
            item.add_marker(pytest.mark.xdist_group(self.name))  # layer_conformance.scheduling reads the node id
            item.add_marker(pytest.mark.conformance)
            yield item

    def context(self, session=None):
        """The check context: the implementation loaded in its executor (raises LoadFailed); ``session``: whose
        executors (default the run's)."""
        from .runner import context_for
        run = self.config.stash[_RUN_KEY]
        return context_for(self.contract, self.target.impl, self.target.framework, device=self.device,
                           seed=run.seed, state_map=self.target.state_map, arg_map=self.target.arg_map,
                           impl_name=self.target.impl, dtype=self.dtype,
                           session=session or run.session).with_options(compile_backend=run.compile_backend)


def blocker_nodeid(nodeid: str, record: Record) -> str:
    """The node id of the check that ``record`` (of the check ``nodeid``) says blocked it: the same target, in the
    cases' own dtype where it was blocked there."""
    target = nodeid.rpartition("::")[0]
    if (record.details or {}).get("blocked_in_own_dtype") and record.dtype:
        target = target.replace(f"-{record.dtype}]", "]")
    return f"{target}::{record.blocked_by}"


_DESELECTED_KEY = pytest.StashKey[set]()


def run_deselected(config) -> set:
    """In a shard of a split matrix (pytest-split's --splits), the node ids it deselected: the other shards' share,
    so a blocked check whose blocker is among them waits for ``merge --gate``. Empty in any other run: a check
    deselected with -k or -m runs nowhere, and what it would block fails with its own symptom."""
    try:
        sharded = bool(config.getoption("splits"))
    except ValueError:   # pytest-split is not installed
        sharded = False
    return config.stash.get(_DESELECTED_KEY, set()) if sharded else set()


def pytest_deselected(items):
    if items:
        config = items[0].config
        config.stash[_DESELECTED_KEY] = run_deselected(config) | {i.nodeid for i in items}


def target_record(run, target, contract, device, dtype, check, **fields) -> Record:
    """The record of ``check`` on one target node of ``run`` (``dtype`` None: the cases' own)."""
    return Record(contract=contract.name, impl=target.impl or "(not applicable)", framework=target.framework,
                  device=device, check=check, dtype=dtype or "",
                  options={**target.options(dtype or contract.default_dtype), **run.rerun_options(target.framework)},
                  **fields)


class ConformanceItem(pytest.Item):
    def __init__(self, *, check, **kw):
        super().__init__(**kw)
        self.check = check
        self.record = None

    def _record(self, outcome, message="", **verdict):
        node = self.parent
        self.record = target_record(self.config.stash[_RUN_KEY], node.target, node.contract, node.device, node.dtype,
                                    self.check, outcome=outcome, message=message, nodeid=self.nodeid,
                                    duration=round(time.perf_counter() - self._started, 6), **verdict)

    def runtest(self):
        self._started = time.perf_counter()   # the check's wall time, loading the layer included

        from .checks import CheckFailed
        from .boundary import LoadFailed
        from .boundary.session import UsageProblem
        lane = self.config.stash[_RUN_KEY].lane
        try:
            if lane is not None and self.check in lane.checks:
                verdict, took = lane.verdict(self)
                self._started = time.perf_counter() - took  # the check's own time on the lane, not the wait
            else:
                verdict = self.compute()
        except UsageProblem as exc:  # the binding, not the layer: the run exits 4
            self._record("error", f"usage error: {exc}", usage_error=True)
            raise CheckFailed(self.record.message) from None
        except LoadFailed as exc:
            self._record("error", str(exc))
            raise CheckFailed(self.record.message) from None
        finally:
            if lane is not None:
                lane.ran(self)  # the target's last item here: its lane checks are queued now
        verdict.pop("check")
        self._record(**verdict)   # the runner's verdict: outcome, message and the record's other fields
        if self.record.outcome == "blocked":   # blocked only by a failure this run recorded (verdict.settle)
            from .verdict import settle
            reported = {r.key(): r for r in self.config.stash[_RUN_KEY].results}
            self.record = settle(self.record, reported.get, complete=self._blocker_id() not in self._planned_here(),
                                 elsewhere=lambda _: self._blocker_id() in run_deselected(self.config))
        if self.record.outcome in ("skipped", "blocked"):
            # pytest's skip line (-rs) says n/a as the table does, from the record's one n/a field
            pytest.skip(f"n/a: {self.record.message}" if self.record.status() == "n/a" else self.record.message)
        if self.record.outcome != "passed":
            raise CheckFailed(self.record.message)

    def _blocker_id(self) -> str:
        """The node id of the check that this item's record says blocked it."""
        return blocker_nodeid(self.nodeid, self.record)

    def _planned_here(self) -> set:
        return {i.nodeid for i in self.session.items}

    def compute(self, session=None) -> dict:
        """The runner's verdict for this check: the layer loaded (into ``session``'s executors; default the
        run's) and checked. Raises UsageProblem or LoadFailed where the binding or the import fails."""
        from .runner import run_check
        ctx = self.parent.context(session)
        return run_check(ctx, self.check, timeout=self.config.getoption("check_timeout"))

    def repr_failure(self, excinfo, style=None):
        msg = getattr(excinfo.value, "message", None) or str(excinfo.value)
        said = f"{self.parent.name}::{self.check} failed: {msg}"
        if self.record is None:
            return said
        from .reproduce import repro_command
        return f"{said}\nreproduce: {repro_command(self.record, self.config.stash[_RUN_KEY].seed)}"

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.check}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if isinstance(item, ConformanceItem) and item.record is not None and call.when == "call":
        report.conformance = item.record
        loaded = _loaded_since_last_report(item)
        if loaded is not None:
            report.conformance_files = loaded   # plain data: it travels from an xdist worker as it is
    return report


def _loaded_since_last_report(item) -> dict | None:
    """The files the item's target loaded (Session.loaded_files, its lane's too) not yet on a report of its binding:
    {"files", "truncated"}; None where the target was never loaded (a failed import leaves no record)."""
    run, target = item.config.stash[_RUN_KEY], item.parent.target
    if target.bundled or not target.impl:
        return None
    key = (target.framework, target.impl)
    sessions = [s for s in (run._session, getattr(run.lane, "session", None)) if s is not None]
    if not any(key in s.loaded_files for s in sessions):
        return None
    files = set().union(*(s.loaded_files.get(key, ()) for s in sessions))
    sent_key = (item.record.contract, *key)
    first = sent_key not in run.files_sent
    sent = run.files_sent.setdefault(sent_key, set())
    new = files - sent
    truncated = any(key in s.files_cut for s in sessions)
    if not (new or first or truncated):
        return None
    sent |= new
    return {"files": sorted(new), "truncated": truncated}


def _baseline_loaded(config) -> list | None:
    """The --baseline's `loaded_files` (what each binding loaded in the baseline run; [] where it has none), or
    None without --baseline: --changed-since selects by it too (targets.select_changed)."""
    try:
        path = config.getoption("baseline")
    except ValueError:   # the gate's options are not registered
        return None
    if not path:
        return None
    from . import results
    try:
        doc = results.load(path)
    except results.ResultsFileError as exc:
        raise pytest.UsageError(f"--baseline {exc}") from None
    loaded = doc.get("loaded_files")
    return loaded if isinstance(loaded, list) else []


def _changed_since_ignore(config) -> list:
    """--changed-since-ignore's globs, else the ini key's, each with the file that sets it (the selection does not
    apply those where the branch changes that file): targets.select_changed."""
    try:
        globs = config.getoption("changed_since_ignore")
    except ValueError:   # the gate's options are not registered
        return []
    if globs:
        return list(globs)
    return [(g, str(config.inipath)) for g in config.getini("conformance_changed_since_ignore") or []]


def _loaded_table(run) -> list[dict]:
    """The results file's `loaded_files`: per binding the files its processes saw it load, relative to the git top
    level where inside it (a baseline made in another checkout matches), the judge's own temporary files left out."""
    import subprocess
    import tempfile
    try:
        top = os.path.realpath(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                                              text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        top = None
    temp = {os.path.realpath(tempfile.gettempdir()), "/tmp"}

    def shown(path: str) -> str | None:
        # the directory resolved, not the file: a symbolic link keeps its own name (its target is listed too)
        p = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if top and (p + os.sep).startswith(top + os.sep):
            return Path(p).relative_to(top).as_posix()
        if any(p.startswith(os.path.join(t, "conformance-")) for t in temp):
            return None   # an export directory, a compilation cache, the sandbox's shared directory
        return p
    out = []
    for (contract, impl, framework), entry in sorted(run.loaded_files.items()):
        files = sorted({f for f in map(shown, entry["files"]) if f is not None})
        out.append({"contract": contract, "impl": impl, "framework": framework, "files": files,
                    **({"truncated": True} if entry["truncated"] else {})})
    return out


# a report travels from an xdist worker to the controller as JSON: its record in the record's JSON form
@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config, report):
    data = yield
    if isinstance(data, dict) and isinstance(data.get("conformance"), Record):
        data["conformance"] = data["conformance"].to_json()
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config, data):
    report = yield
    if isinstance(getattr(report, "conformance", None), dict):
        report.conformance = Record.from_json(report.conformance)
    return report


def _stop_on_sigterm(run):
    """SIGTERM (a CI runner's cancel or timeout) ends the run the way Ctrl-C does, so that the results
    that exist are written and the rest are marked as not run."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum, frame):
        run.interrupted = signal.Signals(signum).name
        raise KeyboardInterrupt(f"stopped by {run.interrupted}")
    signal.signal(signal.SIGTERM, stop)


def _plan(run, nodeids):
    """Before any check runs: the plan, in the journal beside the results file."""
    if run.planned is not None:
        return
    run.planned = [n for n in nodeids if parse_nodeid(n) is not None]
    if run.json_path:
        from .results import Journal
        run.journal = Journal(run.json_path)
        run.journal.plan(run.planned)
    run.results += run.not_applicable()   # no item, no plan entry: decided from the contracts, not run


def start_rank(framework: str) -> int:
    from .frameworks import FRAMEWORKS
    return FRAMEWORKS[framework].start_rank if framework in FRAMEWORKS else len(FRAMEWORKS)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """With -n 0 the checks run framework by framework, in the order their executors start (see
    ``Framework.start_rank``): one framework's checks run while the next one's executors import it.
    Within a framework the checks that fork fresh processes come last: the zygote they fork from starts
    after the framework's other executors, and the first target's would otherwise wait for its import.
    The ALONGSIDE checks, where the run has others, run on a second lane (layer_conformance.lane): their items come
    after all the others and collect the verdicts.
    Under xdist the scheduler (layer_conformance.scheduling) decides, and the order stays as collected.
    It reorders after every other plugin's hook (a wrapper, after its yield): a shard's selection
    (pytest-split) is then made on the collected order, the same with -n 0 as under xdist."""
    from .checks import ALONGSIDE, FRESH_PROCESS
    result = yield
    run = config.stash.get(_RUN_KEY, None)
    if not (run and run.active) or _is_worker(config) or config.getoption("numprocesses", None):
        return result
    slots = [i for i, item in enumerate(items) if isinstance(item, ConformanceItem)]
    checks = {items[i].check for i in slots}
    # the ALONGSIDE checks run on a second lane (layer_conformance.lane) where the run also has others to run beside
    # them; their items come last and collect the verdicts
    alongside = set(ALONGSIDE) & checks if checks - set(ALONGSIDE) else set()
    if alongside and not config.option.collectonly:
        from .lane import Lane
        run.lane = Lane(run.session, sorted(alongside), start_rank)
    ours = sorted((items[i] for i in slots), key=lambda item: (item.check in alongside,
                                                               start_rank(item.parent.target.framework),
                                                               item.check in FRESH_PROCESS))
    for i, item in zip(slots, ours):  # other items keep their places
        items[i] = item
    return result


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    run = session.config.stash.get(_RUN_KEY, None)
    # under xdist the workers collect, and the plan comes from them (pytest_xdist_node_collection_finished)
    if run and run.active and not _is_worker(session.config) and (session.items or not session.config.getoption("numprocesses", None)):
        _plan(run, [item.nodeid for item in session.items if isinstance(item, ConformanceItem)])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    run = node.config.stash.get(_RUN_KEY, None)
    if run and run.active:
        _plan(run, list(ids))


def _record_for_lost_check(run, report) -> Record | None:
    """Rebuild a record from the node id alone (the worker that knew more is gone)."""
    lines = str(report.longrepr).strip().splitlines()
    return _record_from_nodeid(run, report.nodeid, "error",
                               f"the process running this check died ({lines[-1] if lines else 'crashed'}); "
                               f"the worker was restarted and the rest of the run continued")


def _record_from_nodeid(run, nodeid: str, outcome: str, message: str, **extra) -> Record | None:
    ids = parse_nodeid(nodeid)
    if ids is None:
        return None
    contract, label, framework, device, check, dtype = (ids[k] for k in ("contract", "impl", "framework", "device",
                                                                         "check", "dtype"))
    contracts = {str(Path(p).resolve()): c for p, c in getattr(run, "contracts", {}).items()}

    def contract_of(t):
        return contracts.get(str(Path(t.contract_path).resolve()))

    target = next((t for t in run.targets if t.framework == framework
                   and getattr(contract_of(t), "name", Path(t.contract_path).stem) == contract
                   and (not label or label in (t.impl_label, t.impl.replace(":", ".")))), None)
    if target is not None and contract_of(target) is not None:
        # as its item would have recorded it, options included (its reproduction command repeats them)
        return target_record(run, target, contract_of(target), device, dtype, check,
                             outcome=outcome, nodeid=nodeid, message=message, **extra)
    return Record(contract=contract, impl=target.impl if target else label or "?", framework=framework,
                  device=device, check=check, dtype=dtype, outcome=outcome, nodeid=nodeid, message=message, **extra)


def _file_nodeid(config, path: Path, initial_paths) -> str:
    """A contract file's node id as pytest gives it: relative to the rootdir, else to the collection argument
    (a contract directory) it lies in."""
    for base in [config.rootpath, *initial_paths]:
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            continue
    return path.as_posix()


def _is_worker(config):
    return hasattr(config, "workerinput")


_RESULT_KEY = pytest.StashKey[outputs.Result]()


def run_result(config) -> outputs.Result | None:
    """The run's result (its verdict and records), once the session has finished; every output reads it."""
    return config.stash.get(_RESULT_KEY, None)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    run = session.config.stash.get(_RUN_KEY, None)
    if run:
        run.close()
    if not run or not run.active or _is_worker(session.config):
        return
    if run.changed:   # no results, no report: what they would say was decided by files the layer rewrote
        sys.stderr.write("ERROR: " + "\n".join(run.changed) + "\n")
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if run.journal is not None:
            run.journal.close(remove=False)
            run.journal = None
        return
    result = _finish(session, run)
    session.config.stash[_RESULT_KEY] = result
    if result.errors:
        sys.stderr.write("\n".join(result.errors) + "\n")


def _finish(session, run) -> outputs.Result:
    """The one place a run ends: the verdict asked once (the gate's, pytest_conformance_verdict, where it is
    installed), the records of planned checks that never reported added, the exit status set, and every output
    written from the one result (layer_conformance.outputs). Under --collect-only nothing ran: the verdict and
    its lines only (a --changed-since run that selects nothing exits 0), no file."""
    from .verdict import verdict
    config = session.config
    collect_only = config.option.collectonly
    planned = None if collect_only else run.planned
    reported = tuple(run.results)   # as each check reported it: never changed after
    judged = config.hook.pytest_conformance_verdict(session=session, records=reported, planned=planned)
    if judged is None:   # the gate is not installed: the verdict alone, pytest's status stands
        judged = outputs.Judgement(verdict(reported, planned))
    # pytest's own status stands where it is no 0 or 1 (interrupted, a broken contract, a usage error): the gate
    # says so (exit_code None)
    if judged.exit_code is not None:
        session.exitstatus = judged.exit_code
    records = tuple(judged.verdict.records)
    document, completeness = None, None
    if not collect_only:
        not_run, completeness = _account_for_the_plan(session, run)
        records += tuple(not_run)
        if any(r.usage_error for r in records) and session.exitstatus in (0, 1):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR  # a binding that does not fit its layer
        document = _document(run, records, completeness, judged.expectations_added)
    result = outputs.Result(verdict=judged.verdict, records=records, document=document, lines=tuple(judged.lines),
                            baseline=judged.baseline, baseline_name=judged.baseline_name)
    if collect_only:
        return result
    written = outputs.write_files(result, config)
    if run.journal is not None:   # the results file holds what the journal held: it goes once that is written
        run.journal.close(remove=bool(completeness["complete"] and written.get("json")))
        run.journal = None
    if result.errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


def _account_for_the_plan(session, run) -> tuple[list, dict]:
    """Every planned check has a record: the ones that never reported are marked "not run" (new records, the
    reported ones unchanged), and a run whose results do not cover its plan never exits 0."""
    planned = run.planned or []
    done = {r.nodeid for r in run.results}
    missing = [n for n in planned if n not in done]
    why = (f"interrupted ({run.interrupted})" if run.interrupted else
           "interrupted" if session.exitstatus == pytest.ExitCode.INTERRUPTED else "no result came back")
    not_run = [rec for rec in (_record_from_nodeid(run, nodeid, "error", f"not run: {why}", not_run=True)
                               for nodeid in missing) if rec is not None]
    if missing and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return not_run, {"complete": not missing, "planned": len(planned), "not_run": len(missing),
                     **({"interrupted": why} if missing else {})}


def _document(run, records, completeness, expectations_added=None) -> dict:
    """The results document every file output writes (layer_conformance.results.document)."""
    from . import results
    env = results.environment(run.frameworks(), results.devices_of(records), run.seed,
                              sandbox=run.sandbox.describe() if getattr(run, "sandbox", None) else None)
    selection = getattr(run.targets, "selection", None)   # --changed-since: what changed, what was selected
    if selection is not None and expectations_added is not None:
        selection = dict(selection, expectations_added=expectations_added)   # what the gate listed
    extra = dict(completeness or {}, **({"selection": selection} if selection is not None else {}))
    loaded = _loaded_table(run)   # what a later --changed-since --baseline selects by
    if loaded:
        extra["loaded_files"] = loaded
    return results.document(records, env, extra, plan=run.planned)   # plan: counts `not_collected`


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    run = config.stash.get(_RUN_KEY, None)
    if run and run.left_out and not _is_worker(config):
        what = "conformance_impl" if option(config, "impl", "conformance_impl") else "conformance_bindings"
        terminalreporter.write_line(
            f"layer conformance: the checks of {what} ({config.inipath.name if config.inipath else 'the ini file'}) "
            f"are not part of this run (the files given leave them out); `pytest` with no file arguments, "
            f"`pytest .` or `pytest -m conformance` runs them", yellow=True)
    if run and run.active and not _is_worker(config) and getattr(run, "sandbox", None) and not run.sandbox.namespaces:
        terminalreporter.write_line(f"layer conformance: executors ran without a sandbox "
                                    f"({run.sandbox.describe()})", yellow=True)
    for kept in getattr(run, "kept", None) or ():
        from .boundary import warm
        terminalreporter.write_line(
            f"layer conformance: the {kept['framework']} zygote (pid {kept['pid']}, "
            f"{'kept from an earlier run' if kept['reused'] else 'started by this run'}) stays running for the "
            f"next run (--keep-warm), and ends after {kept['idle_s']:g} s without one; end it now with "
            f"`{warm.command_line()}`", yellow=True)
    result = run_result(config)
    if result is not None:
        outputs.write_terminal(result, terminalreporter)   # the table, where each output went, the gate's lines
