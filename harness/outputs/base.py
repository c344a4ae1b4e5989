"""The interface every output module fills (``Output``) and what they read (``Result``); see
layer_conformance.outputs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..verdict import Verdict

SESSION_FINISH = "sessionfinish"   # a file, written once the verdict is made
TERMINAL = "terminal"              # pytest's terminal summary (the target is the terminal reporter)


@dataclass(frozen=True)
class Output:
    name: str
    options: tuple                          # the command-line options it owns; docs/options.md lists each
    addoption: Callable                     # (group, parser) -> None: adds them (and their ini keys) to pytest
    target: Callable                        # (config) -> where it writes (a path; for TERMINAL the reporter), or None
    write: Callable                         # (result, target) -> a line saying where it went, or None
    at: str = SESSION_FINISH                # SESSION_FINISH or TERMINAL
    configure: Callable | None = None       # (config) -> None: set-up before any check runs (JUnit's names)


@dataclass(frozen=True)
class Judgement:
    """The answer to ``pytest_conformance_verdict`` (layer_conformance.hookspecs): the gate's verdict and what goes
    with it. Nothing in it is written into the run: the plugin makes the ``Result`` from it."""
    verdict: Verdict
    exit_code: int | None = None            # the verdict's code (None: pytest's own stands): exitcodes.exit_status
    lines: tuple = ()                       # the gate's terminal lines, (text, markup)
    baseline: dict | None = None            # the --baseline document (the HTML report shows the diff)
    baseline_name: str | None = None
    expectations_added: list | None = None  # the results file's `selection.expectations_added` (--changed-since)


@dataclass(frozen=True)
class Result:
    """What every output reads: made once at session finish (layer_conformance.plugin), stashed on the config
    (``layer_conformance.plugin.run_result``). The records are the verdict's, then those of the planned checks that
    never reported; none changes after its check."""
    verdict: Verdict
    records: tuple
    document: dict | None                   # the results document (layer_conformance.results.document); None
                                            # under --collect-only, which runs nothing and writes no file
    lines: tuple = ()                       # the gate's terminal lines, (text, markup)
    baseline: dict | None = None
    baseline_name: str | None = None
    said: list = field(default_factory=list)     # what the outputs said once written ("results: /abs/path")
    errors: list = field(default_factory=list)   # the outputs that could not be written, each a line


def write_file(path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, with the mode a plain ``open(path, "w")`` gives
    (``results.write_atomically``: the one writer of every output file)."""
    from ..results import write_atomically
    write_atomically(path, text)
