"""The run's outputs: one module per format, each reading the run's ``Result`` (the verdict, made once at session
finish, and the results document) and nothing else. Each module defines ``OUTPUT``, an ``Output``: its name, the
command-line options it owns, how they are added, where it writes and how. ``OUTPUTS`` lists them, in the order
they are written (the results file first: a report that cannot be written never costs it).

Adding a format: a module here with its ``OUTPUT``, its line in ``OUTPUTS``, and its options in docs/options.md
("Outputs"); ``tests/meta_tests/test_outputs.py`` holds every registered output to this interface and to the docs.

    layer_conformance.outputs.json       --conformance-json PATH   the results file (layer_conformance.results)
    layer_conformance.outputs.html       --conformance-html PATH   the HTML report (layer_conformance.report)
    layer_conformance.outputs.junit      --junitxml PATH           pytest's JUnit file, with readable check names
    layer_conformance.outputs.terminal                             the summary table and the gate's lines
"""
from __future__ import annotations

from .base import SESSION_FINISH, TERMINAL, Judgement, Output, Result
from . import html, json, junit, terminal

__all__ = ["OUTPUTS", "Output", "Result", "Judgement", "SESSION_FINISH", "TERMINAL", "addoption", "configure",
           "write_files", "write_terminal"]

OUTPUTS: tuple = (json.OUTPUT, html.OUTPUT, junit.OUTPUT, terminal.OUTPUT)


def addoption(group, parser) -> None:
    for output in OUTPUTS:
        output.addoption(group, parser)


def configure(config) -> None:
    for output in OUTPUTS:
        if output.configure is not None:
            output.configure(config)


def write_files(result: Result, config) -> dict:
    """Every SESSION_FINISH output asked for, in order; one that cannot be written is a line in ``result.errors``
    and does not stop the others. Returns {name: written} of those asked for."""
    written = {}
    for output in OUTPUTS:
        target = output.target(config) if output.at == SESSION_FINISH else None
        if target is None:
            continue
        try:
            said = output.write(result, target)
        except OSError as exc:
            result.errors.append(f"{output.options[0] if output.options else output.name} {target}: "
                                 f"cannot write the file: {exc}")
            written[output.name] = False
            continue
        written[output.name] = True
        if said:
            result.said.append(said)
    return written


def write_terminal(result: Result, terminalreporter) -> None:
    for output in OUTPUTS:
        if output.at == TERMINAL:
            output.write(result, terminalreporter)
