"""The terminal: pytest's summary gets the result's table (one row per target, one column per check), where each
output went and what could not be written, then the gate's lines (its verdict last)."""
from __future__ import annotations

from ..results import summary_table
from .base import TERMINAL, Output


def addoption(group, parser) -> None:
    """pytest's own options (-q, -r, --color) govern the terminal: nothing to add."""


def target(config):
    return config.pluginmanager.get_plugin("terminalreporter")


def write(result, terminalreporter) -> None:
    if result.records:
        terminalreporter.section("layer conformance")
        # the test ids pytest reported on: a skipped one is in pytest's own "skipped", an n/a record of a check never
        # collected is not
        collected = {getattr(r, "nodeid", None) for reports in terminalreporter.stats.values() for r in reports}
        terminalreporter.write_line(summary_table(result.records, collected))
        for line in result.said:
            terminalreporter.write_line(line)
        for line in result.errors:
            terminalreporter.write_line(line, red=True)
    if result.lines:
        terminalreporter.section("conformance gate")
        for text, markup in result.lines:
            terminalreporter.write_line(text, **markup)


OUTPUT = Output(name="terminal", options=(), addoption=addoption, target=target, write=write, at=TERMINAL)
