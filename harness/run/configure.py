"""The configure phase: what the run checks, decided once from the options, the ini file and the contracts, before
any collection. Its answer, ``Configured``, is frozen and stashed (``CONFIGURED_KEY``); every later phase reads it
and none writes it. A broken contract stops the run here (exit 3), a bad option or binding is a usage error
(exit 4). The executors it starts are ``layer_conformance.run.executors``' (``EXECUTORS_KEY``)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .. import __version__
from ..contract import (MAX_CONTRACT_ELEMENTS_ENV, MAX_INPUT_ELEMENTS_ENV, MAX_RUN_ELEMENTS_ENV, ContractError,
                        ContractNotFound, ElementBudget, input_element_limit)
from ..exitcodes import stop_for_broken_contract
from ..frameworks import FRAMEWORKS
from ..nodeids import target_name
from .executors import Executors, start_rank
from .guard import guard_imports, judge_first


def option(config, name, ini):
    """An option's value: the command line's, else the ini file's ``ini`` (public: the gate reads it too)."""
    value = config.getoption(name)
    if value in (None, [], ""):
        value = config.getini(ini)
    return value


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


@dataclass(frozen=True)
class Configured:
    """The run as configured: written once by the configure phase, read by the others (and the gate)."""
    active: bool                   # the run plans and runs checks
    left_out: bool = False         # the ini file names a layer whose checks the files given leave out
    alone: bool = True             # a conformance run alone: only contract files are collected
    seed: int = 0
    devices: tuple = ("cpu",)
    checks: tuple = ()
    dtypes: tuple = ()             # --dtype: the added dtypes that run (empty: all the contract's)
    json_path: str | None = None   # --conformance-json: the journal goes beside it
    targets: list = field(default_factory=list)    # targets.Targets (``selection``, ``untouched``)
    contracts: dict = field(default_factory=dict)  # resolved path -> Contract, each validated
    by_path: dict = field(default_factory=dict)    # resolved path -> its targets
    paths: tuple = ()
    path_set: frozenset = frozenset()
    ancestors: frozenset = frozenset()
    contract_dirs: tuple = ()      # the collection arguments added for the contract files
    user_paths: tuple = ()         # the user's own collection arguments, collected as usual
    inputs: object = None          # the files read before any user code ran (targets.Inputs)
    pythons: dict = field(default_factory=dict)
    compile_backend: str | None = None
    max_input_elements: int | None = None
    budget: object = None          # contract.ElementBudget: drawn elements per contract and per run
    sandbox: object = None         # boundary.sandbox's configuration (``describe()``, ``namespaces``)
    limits: tuple = ()             # (option, value) of the limits a record's reproduction repeats

    @property
    def selected_nothing(self) -> bool:
        """A --changed-since run that selected no binding (it is still gated: exitcodes.verdict_decides)."""
        return getattr(self.targets, "selection", None) is not None and not self.targets

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
            wanted = t.dtypes if t.dtypes is not None else (list(self.dtypes) or None)
            if wanted is not None:
                extra = [d for d in extra if d in wanted]  # the cases' own dtype always runs
            for device in self.devices:
                for dtype in [None] + extra:
                    name = target_name(contract.name, None if t.bundled else impl, t.framework, device, dtype)
                    yield t, name, device, dtype, impl

    def rerun_options(self, framework: str) -> dict:
        """The options beyond its binding's a record of ``framework`` ran with, for its reproduction command."""
        # the limits too: a check that timed out or ran out of memory under them must do so again
        return {k: v for k, v in (("compile_backend", self.compile_backend),
                                  ("executor_python", self.pythons.get(framework)), *self.limits) if v is not None}

    def frameworks(self) -> dict:
        from ..frameworks import versions
        out = {}
        for fw in sorted({t.framework for t in self.targets}):
            out.update(versions(fw, self.pythons.get(fw)))
        return out


CONFIGURED_KEY = pytest.StashKey[Configured]()
EXECUTORS_KEY = pytest.StashKey[Executors]()


def configured(config) -> Configured | None:
    """This config's run as configured (None before pytest_configure)."""
    return config.stash.get(CONFIGURED_KEY, None)


def current_run(config) -> Configured | None:
    """This config's configured run when it is active (it plans and runs checks), else None."""
    run = configured(config)
    return run if run is not None and run.active else None


def _arg_paths(config) -> list[Path]:
    """The collection arguments as resolved paths (``tests/test_x.py::test_a[1]`` -> tests/test_x.py)."""
    base = config.invocation_params.dir
    return [(base / str(a).split("::", 1)[0]).resolve() for a in config.args]


def covers(paths, target: Path) -> bool:
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


@dataclass(frozen=True)
class _Asked:
    """What the options and the ini file ask for, read without any I/O."""
    contracts: list
    impl: str | None
    bindings: str | None
    frameworks: list
    seed: int
    devices: tuple
    checks: tuple
    json_path: str | None
    active: bool
    left_out: bool
    alone: bool


def _asked(config) -> _Asked:
    from ..checks import CHECKS, DEFAULT_CHECKS
    contracts = list(option(config, "contract", "conformance_contract") or [])
    impl = option(config, "impl", "conformance_impl") or None
    bindings = option(config, "bindings", "conformance_bindings") or None
    frameworks = list(option(config, "framework", "conformance_framework") or [])
    device = option(config, "device", "conformance_device") or "cpu"
    seed = option(config, "seed", "conformance_seed")
    json_path = option(config, "conformance_json", "conformance_json") or None
    checks = tuple(config.getoption("check") or DEFAULT_CHECKS)  # opt-in checks only when named
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise pytest.UsageError(f"--check {', '.join(unknown)}: known checks are {', '.join(CHECKS)}")
    explicit = bool(contracts or impl or bindings or frameworks or json_path
                    or config.getoption("check") or config.getoption("device"))
    files_given = config.args_source == pytest.Config.ArgsSource.ARGS
    from_command_line = bool(config.getoption("impl") or config.getoption("bindings"))
    if from_command_line:
        wanted = True                        # asked for on the command line: always
    elif impl or bindings:
        # set in the project's ini: part of a whole-project run (no file arguments, or the rootdir
        # among them), not of `pytest tests/test_x.py` or an IDE running one test
        wanted = not files_given or covers(_arg_paths(config), config.rootpath)
    else:
        wanted = not files_given and (explicit or config.getini("conformance_default_run"))
    selects = _markexpr_selects_conformance(config)
    return _Asked(contracts=contracts, impl=impl, bindings=bindings, frameworks=frameworks,
                  seed=int(seed) if seed not in (None, "") else 0,
                  devices=tuple({"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu", "cuda"]}[device]),
                  checks=checks, json_path=json_path,
                  # `-m "not conformance"` (or any expression no conformance item can satisfy): nothing is planned,
                  # so no implementation is imported and no framework loaded
                  active=wanted and selects,
                  # the ini file names a layer, and the files given leave its checks out: the summary says so, once
                  left_out=bool((impl or bindings) and not wanted and selects),
                  # a conformance run alone (the fast path: only contract files are collected) unless the user's
                  # own tests are part of this run too
                  alone=not files_given and (from_command_line or not (impl or bindings)))


def _keep_warm(config) -> float | None:
    """--keep-warm's seconds (None: nothing outlives the run)."""
    from ..boundary.warm import DEFAULT_SECONDS
    seconds = config.getoption("keep_warm_for", None)
    if seconds is not None and not config.getoption("keep_warm", False):
        raise pytest.UsageError("--keep-warm-for is the time a kept zygote waits: give it with --keep-warm")
    return (seconds or DEFAULT_SECONDS) if config.getoption("keep_warm", False) else None


def _element_limits(config) -> tuple:
    """(largest input, the element budget), the environment set for the processes started from here."""
    max_elements = config.getoption("max_input_elements")
    if max_elements is not None:
        # processes started from here (xdist workers, executors) load contracts with the same limit
        os.environ[MAX_INPUT_ELEMENTS_ENV] = str(max_elements)
    for name, env in (("max_contract_elements", MAX_CONTRACT_ELEMENTS_ENV), ("max_run_elements", MAX_RUN_ELEMENTS_ENV)):
        if config.getoption(name, None) is not None:
            os.environ[env] = str(config.getoption(name))
    try:
        limit = input_element_limit(max_elements)
        # the drawn elements of each contract, and of all of them in this run (ContractFile loads count once)
        return limit, ElementBudget(config.getoption("max_contract_elements", None),
                                    config.getoption("max_run_elements", None), limit)
    except ValueError as exc:  # a malformed environment variable
        raise pytest.UsageError(str(exc)) from None


def _sandbox(config, keep_warm):
    from ..boundary import sandbox as sandbox_mod
    if keep_warm:
        sandbox_mod.keep_shared()   # before the sandbox is probed: its shared directory outlives the run too
    try:  # before any executor starts (a binding's framework is detected in one)
        return sandbox_mod.configure(config.getoption("sandbox"))
    except sandbox_mod.Unavailable as exc:
        raise pytest.UsageError(str(exc)) from None


def _inputs_and_pythons(config, asked: _Asked):
    """The files the judge decides by, read and hashed before any executor starts, and --executor-python."""
    from .. import targets as targets_mod
    try:
        expectations = config.getoption("expectations", None) or config.getini("conformance_expectations")
    except ValueError:   # the gate's options are not registered
        expectations = None
    inputs = targets_mod.read_inputs(asked.contracts, asked.bindings, expectations or None)
    try:
        pythons = targets_mod.parse_pythons(option(config, "executor_python", "conformance_executor_python"),
                                            str(config.rootpath))
    except targets_mod.UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    return inputs, pythons


def _targets(config, asked: _Asked, pythons: dict, executors: Executors | None):
    """The planned targets (targets.plan); ``executors``: where a binding's framework is detected (None: in a
    throwaway executor)."""
    from .. import targets as targets_mod
    try:
        state_map = targets_mod.parse_state_map(option(config, "state_map", "conformance_state_map"))
        arg_map = targets_mod.parse_arg_map(option(config, "arg_map", "conformance_arg_map"))
        changed_since = config.getoption("changed_since")
        return targets_mod.plan(asked.contracts, asked.impl, asked.bindings, asked.frameworks, state_map,
                                arg_map=arg_map, changed_since=changed_since, pythons=pythons,
                                baseline_loaded=_baseline_loaded(config) if changed_since else None,
                                changed_since_ignore=_changed_since_ignore(config),
                                accept_reference_change=bool(config.getoption("accept_reference_change", False)),
                                zygote_of=executors.zygote_of if executors is not None else None)
    except (targets_mod.UsageError, ContractNotFound) as exc:
        raise pytest.UsageError(str(exc)) from None
    except ContractError as exc:
        stop_for_broken_contract(str(exc))


def _validate_early(asked: _Asked, named: list, max_input_elements, budget, inputs, pythons: dict) -> dict:
    """resolved path -> its validated Contract, or the exception validating it raised: the contracts --contract
    names (without --bindings: then they are exactly the planned ones), validated before detection where a zygote
    is already importing (``named``), so that the reference executor's work overlaps that import. Empty otherwise."""
    if not named or asked.bindings or not asked.contracts:
        return {}
    from ..contract import find_contract
    early = {}
    for name in dict.fromkeys(asked.contracts):
        try:
            path = str(Path(find_contract(name)).resolve())
        except ContractError:
            continue   # an unknown contract: planning says so
        early[path] = _validated(path, max_input_elements, budget, inputs, pythons)
    return early


def _validated(path: str, max_input_elements, budget, inputs, pythons: dict):
    """The contract at ``path`` loaded and its reference run against itself, or the ContractError that says why not."""
    from ..reference_check import load_checked
    try:
        return load_checked(path, max_input_elements, budget, raw=inputs.raw(path), pythons=pythons)  # as read before any user code
    except ContractError as exc:
        return exc


def _contracts(paths, max_input_elements, budget, inputs, pythons: dict, early: dict | None = None) -> dict:
    """Every planned contract, validated now (or before detection: ``early``), so that a broken one is reported
    before collection: each loaded, then its reference run against itself (the step that runs code, in the
    reference executor)."""
    contracts, broken = {}, []
    for path in paths:
        got = (early or {}).get(path)
        got = _validated(path, max_input_elements, budget, inputs, pythons) if got is None else got
        if isinstance(got, ContractError):
            broken.append(str(got))
        else:
            contracts[path] = got
    if broken:
        stop_for_broken_contract("\n".join(broken))
    return contracts


def _dtypes(config, targets, contracts) -> tuple:
    """--dtype, and each binding's dtypes, among those the contracts declare."""
    from ..dtypes import FLOATS
    dtypes = tuple(option(config, "dtype", "conformance_dtype") or [])
    unknown = [d for d in dtypes if d not in FLOATS]
    if unknown:
        raise pytest.UsageError(f"--dtype {', '.join(unknown)}: known dtypes are {', '.join(FLOATS)}")
    for t in targets:
        contract = contracts[str(Path(t.contract_path).resolve())]
        declared = [contract.default_dtype] + contract.extra_dtypes()
        unknown = [d for d in (t.dtypes or ()) if d not in declared]
        if unknown:
            raise pytest.UsageError(f"binding {t.impl} -> {contract.name}: dtypes {', '.join(unknown)} are not "
                                    f"among the contract's ({', '.join(declared)})")
    return dtypes


def _collection_args(config, paths, alone: bool) -> dict:
    """The contracts' directories become collection arguments and pytest_ignore_collect passes only the contract
    files inside them: given files as arguments, pytest re-collects a file's whole directory once per file
    argument (quadratic in contracts). pytest collects a path reached twice once."""
    dirs = sorted({str(Path(p).parent) for p in paths})
    contract_dirs = tuple(Path(d) for d in dirs if not any(str(a) in dirs for a in Path(d).parents))
    # the user's own collection arguments (files, directories, testpaths), collected as usual
    user_paths = () if alone else tuple(_arg_paths(config))
    config.args[:] = ([] if alone else list(config.args)) + [str(d) for d in contract_dirs]
    return dict(path_set=frozenset(paths), ancestors=frozenset(str(a) for p in paths for a in Path(p).parents),
                contract_dirs=contract_dirs, user_paths=user_paths)


def configure(config, judge_modules) -> tuple[Configured, Executors | None]:
    """The run as configured, and its executors (None where it is not active), each stashed (the phase's keys);
    ``judge_modules``: what the judge imports before any user code (layer_conformance.plugin.JUDGE_MODULES)."""
    asked = _asked(config)
    common = dict(left_out=asked.left_out, alone=asked.alone, seed=asked.seed, devices=asked.devices,
                  checks=asked.checks, json_path=asked.json_path)
    if not asked.active:
        config.stash[CONFIGURED_KEY] = run = Configured(active=False, **common)
        return run, None
    max_input_elements, budget = _element_limits(config)
    executors = config.stash[EXECUTORS_KEY] = Executors(config, _keep_warm(config))
    # the executors started below end with the config however it ends: a usage or contract error raised
    # before the session ends them (pytest runs no sessionfinish then), without waiting for a framework import
    config.add_cleanup(executors.close)
    sandbox = _sandbox(config, executors.keep_warm)
    # The judge before user code: its imports guarded, and the files it decides by read and hashed, before
    # any executor starts (one imports from the current directory, which code under test may write to); what
    # the judge may import is imported before the detection below imports any layer.
    guard_imports(config)
    inputs, pythons = _inputs_and_pythons(config, asked)
    executors.pythons = pythons
    runs_checks = not (is_worker(config) or config.getoption("numprocesses", None) or config.option.collectonly)
    if runs_checks:
        # contract validation asks the references first, and waits for them: their executor (numpy only, a
        # fraction of a second) starts before any framework import, which executors start one at a time
        from ..boundary.session import prestart_references
        prestart_references()
    named = _named_frameworks(config, asked, inputs)
    if runs_checks and named:
        # frameworks named on the command line or by the bindings: their zygotes (each a framework import, and no
        # user code) start now, so that the import overlaps the judge's own imports, detection and validation
        executors.session.prestart(sorted(named, key=start_rank), forks=False)
    judge_first(judge_modules)
    # the contracts the command line names, validated while the zygotes started above import their frameworks
    # (detection below waits for them); what it found is said after planning, so a usage error still comes first
    early = _validate_early(asked, named, max_input_elements, budget, inputs, pythons) if runs_checks else {}
    targets = _targets(config, asked, pythons, executors if runs_checks else None)
    changed = inputs.changed()   # written by a layer while detection imported it
    if changed:
        raise pytest.UsageError("\n".join(changed))
    if runs_checks:
        # this process runs every check: its executors start now on a background thread, in the order the
        # targets need them, so that a framework's import overlaps validation, collection and earlier checks
        executors.session.prestart(sorted(dict.fromkeys(t.framework for t in targets), key=start_rank))
    by_path: dict[str, list] = {}
    for t in targets:
        by_path.setdefault(str(Path(t.contract_path).resolve()), []).append(t)
    paths = tuple(sorted(by_path))
    contracts = _contracts(paths, max_input_elements, budget, inputs, pythons, early)
    dtypes = _dtypes(config, targets, contracts)
    from .. import targets as targets_mod
    # a binding that does not fit its layer's constructor: said once, before any check runs (exit 4)
    misfits = targets_mod.binding_problems(targets, contracts)
    if misfits:
        executors.close()  # the executors started above
        raise pytest.UsageError("\n".join(misfits))
    limits = tuple((name, config.getoption(name)) for name in ("check_timeout", "memory_limit", "max_input_elements"))
    run = Configured(active=True, **common, dtypes=dtypes, targets=targets, contracts=contracts, by_path=by_path,
                     paths=paths, inputs=inputs, pythons=pythons,
                     compile_backend=option(config, "compile_backend", "conformance_compile_backend") or None,
                     max_input_elements=max_input_elements, budget=budget, sandbox=sandbox, limits=limits,
                     **_collection_args(config, paths, asked.alone))
    config.stash[CONFIGURED_KEY] = run
    return run, executors


def _named_frameworks(config, asked: _Asked, inputs) -> list[str]:
    """The frameworks a run will surely use, known before detection: --framework, or else every framework the
    bindings file names (a binding without one is detected). None for a --changed-since run, which may select
    none of a framework's bindings: a framework import it does not need would compete with the ones it does."""
    named = [f for f in asked.frameworks if f in FRAMEWORKS]
    if named or not asked.bindings or config.getoption("changed_since", None):
        return list(dict.fromkeys(named))
    from ..targets import bindings_entries
    try:
        entries = bindings_entries(inputs.raw(asked.bindings) or b"") or []
    except Exception:  # a malformed file: planning says what is wrong with it
        return []
    return list(dict.fromkeys(str(e["framework"]) for e in entries
                              if isinstance(e, dict) and str(e.get("framework")) in FRAMEWORKS))


def _baseline_loaded(config) -> list | None:
    """The --baseline's `loaded_files` (what each binding loaded in the baseline run; [] where it has none), or
    None without --baseline: --changed-since selects by it too (targets.select_changed)."""
    try:
        path = config.getoption("baseline")
    except ValueError:   # the gate's options are not registered
        return None
    if not path:
        return None
    from .. import results
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


class Configuration:
    """The configure phase's hooks after pytest_configure: the run's header, and xdist's grouping."""

    def __init__(self, run: Configured):
        self.run = run

    def pytest_report_header(self, config):
        run = self.run
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

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        if node.config.getoption("dist") == "loadgroup":
            node.workerinput["conformance_loadgroup"] = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getoption("dist") == "loadgroup":
            from ..scheduling import FrameworkGroupScheduling
            return FrameworkGroupScheduling(config, log)
        return None
