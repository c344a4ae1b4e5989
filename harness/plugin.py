"""The pytest plugin's entry point (``pytest11``: ``layer_conformance.plugin``): the options, the judge's import
guard, and the run's phases registered at pytest_configure, each a plugin object of its own with its own stash keys
(layer_conformance.run): configure (what the run checks), collection (contract files, items, the plan), running
(each check's record) and the session's end (the verdict, the outputs, the one exit status).

Node ids read like the domain and are identical on every xdist worker:
``specs/rmsnorm.yaml::rmsnorm[torch-cpu]::serialization``.
"""
from __future__ import annotations

import argparse
import math

import pytest

from . import import_paths
import_paths.guard_early()   # before numpy or yaml: a numpy.py beside the run is never imported here (exit 4 below)
from .frameworks import FRAMEWORKS
from .contract import (CONTRACT_ELEMENTS_PER_INPUT, DEFAULT_MAX_INPUT_ELEMENTS, MAX_CONTRACT_ELEMENTS_ENV,
                       MAX_INPUT_ELEMENTS_ENV, MAX_RUN_ELEMENTS_ENV, MAX_TIMEOUT, RUN_ELEMENTS_PER_INPUT,
                       input_element_limit)
from . import hookspecs, outputs
from .run import guard
from .run.collection import Collection, ContractFile, TargetNode
from .run.configure import Configuration, configure, current_run, option
from .run.executors import start_rank
from .run.guard import GUARDED, JudgeImportGuard
from .run.handover import run_deselected
from .run.running import ConformanceItem, Running, blocker_nodeid
from .run.session_end import SessionEnd, run_result

# the public accessors (the gate, the outputs and the tests read the run through them)
__all__ = ["ConformanceItem", "ContractFile", "GUARDED", "JUDGE_MODULES", "JudgeImportGuard", "TargetNode",
           "blocker_nodeid", "current_run", "option", "run_deselected", "run_result", "start_rank"]


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
                help=f"most elements a contract's drawn inputs may have together (default "
                     f"{CONTRACT_ELEMENTS_PER_INPUT} times the per-input limit, or ${MAX_CONTRACT_ELEMENTS_ENV})")
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
    outputs.addoption(g, parser)   # each output's options (--conformance-json, --conformance-html): outputs/


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)   # pytest_conformance_verdict: the gate's verdict, asked once


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



# --- the judge before user code -------------------------------------------------------------------------------
# Everything the judge (this process: pytest, the plugin, the gate, the reports) imports after user code may have
# run: imported before any does (detection included). tests/hostile/test_judge_first.py checks that this list
# covers every import inside a function of the judge's modules.
JUDGE_MODULES = (
    "ml_dtypes", "jinja2", "markupsafe", "jsonschema", "numpy", "yaml", "execnet", "pytest",
    "ast", "atexit", "concurrent.futures", "fcntl", "fnmatch", "re", "hashlib", "importlib.metadata", "inspect",
    "json", "resource", "secrets", "shlex", "signal", "site", "stat", "subprocess", "tempfile", "textwrap",
    "threading", "importlib.machinery",
    "ctypes", "ctypes.util",  # ctypes: the stderr file's hole punching (boundary.stderr)
    "_pytest.junitxml", "_pytest.mark", "_pytest.mark.expression",
    *(f"layer_conformance.{m}" for m in (
        "binding", "changed", "check_catalog", "checks", "checks.applicable", "checks.base", "checks.blame",
        "checks.common", "checks.mistakes", "checks.properties", "compare",
        "contract", *(f"contract.{m}" for m in ("problems", "reading", "yaml_lines", "schema", "sections", "model",
                                                "rules", "loading")),
        "dtypes", "errors",
        "boundary", "boundary.cgroup", "boundary.client", "boundary.procfs", "boundary.process", "boundary.remote",
        "boundary.session", "boundary.stderr", "boundary.warm",
        # the protocol's area modules, spelled out (their names are check ids too: a literal list of them would
        # read as a second table of checks, tests/meta_tests/test_check_declarations.py)
        "protocol", "protocol.not_applicable", "protocol.core", "protocol.autodiff", "protocol.compile",
        "protocol.export", "protocol.precision", "protocol.batching", "protocol.construction", "protocol.layout",
        "protocol.shapes",
        "frameworks", "gate", "gate.expectations", "gate.hooks", "inputs", "hookspecs", "lane", "nodeids",
        "outputs", "outputs.base", "outputs.html", "outputs.json", "outputs.junit", "outputs.terminal", "record",
        "reference_check", "reference_run", "report", "report.html", "reproduce", "results", "verdict", "runner",
        "scheduling", "targets", "tolerances", "wire", "state_map", "impl_reference")),
)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """--untrusted-tree: before pytest loads any conftest.py, a file argument inside the tree under test, or a tree
    named where pytest looks for initial conftests (test* beside an argument), is a usage error; and the tree is
    never collected."""
    guard.refuse_untrusted_arguments(early_config)


def pytest_configure(config):
    """The run configured (layer_conformance.run.configure), then its phases registered, each with its own state."""
    config.addinivalue_line("markers", "conformance: a layer conformance check")
    outputs.configure(config)   # JUnit's names (layer_conformance.outputs.junit)
    run, executors = configure(config, JUDGE_MODULES)
    if run.active:
        config.pluginmanager.register(Configuration(run), "layer-conformance-configure")
        config.pluginmanager.register(Collection(config, run, executors), "layer-conformance-collection")
        config.pluginmanager.register(Running(config, run, executors), "layer-conformance-running")
    config.pluginmanager.register(SessionEnd(config, run, executors), "layer-conformance-session-end")
    # one framework's checks on one xdist worker, so a worker imports each framework once
    if run.active and getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
    # workers re-parse the original command line, so tell them about loadgroup explicitly
    if run.active and getattr(config, "workerinput", {}).get("conformance_loadgroup"):
        config.option.loadgroup = True
