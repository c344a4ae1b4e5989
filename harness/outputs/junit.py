"""--junitxml PATH (pytest's own option and writer): the JUnit file, with readable names for conformance checks.

pytest derives a testcase's ``classname`` and ``name`` from the node id and takes everything after the
first ``[`` for parameters, which garbles an id with brackets in a middle segment
(``specs/rmsnorm.yaml::rmsnorm[X-torch-cpu]::values`` became the name ``rmsnorm[X-torch-cpu]::values]``).
Here a conformance check is named ``classname="specs.rmsnorm.rmsnorm[X-torch-cpu]"``, ``name="values"``:
the contract file as a dotted path, then the target, with the check as the test's name.

pytest's junitxml plugin writes the file at its own session finish, from the reports (an expected failure is a
skip there, as the gate shows it); this output names each check before that plugin records its report, and
writes nothing itself.
"""
from __future__ import annotations

import pytest

from ..nodeids import parse as parse_nodeid
from .base import Output


def junit_names(nodeid: str, prefix: str | None = None) -> tuple[str, str] | None:
    """(classname, name) of a conformance check's node id, else None (the user's own tests keep pytest's)."""
    if nodeid.endswith("]") and nodeid.count("]") > nodeid.count("["):
        nodeid = nodeid[:-1]   # an id already passed through pytest's NodeId (params taken from the first "[")
    path, sep, rest = nodeid.partition("::")
    if not sep or not path.endswith((".yaml", ".yml")) or parse_nodeid(nodeid) is None:
        return None
    target, sep, check = rest.rpartition("::")
    if not sep:
        return None
    # a contract outside the rootdir (a bundled one in site-packages) has "../" in its id: drop those parts
    parts = [p for p in path.rsplit(".", 1)[0].split("/") if p not in ("", ".", "..")]
    classname = ".".join(([prefix] if prefix else []) + parts + [target])
    return classname, check


class JunitNames:
    def __init__(self, config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        try:
            from _pytest.junitxml import xml_key   # no public handle on pytest's junitxml writer
        except ImportError:
            return
        # set only with --junitxml, in the process that writes the file (the controller under xdist)
        xml = self.config.stash.get(xml_key, None)
        names = junit_names(report.nodeid, getattr(xml, "prefix", None)) if xml is not None else None
        if names is None or not hasattr(xml, "node_reporter"):
            return
        # attributes set before pytest's junitxml records the report win over the ones it derives
        reporter = xml.node_reporter(report)
        reporter.add_attribute("classname", names[0])
        reporter.add_attribute("name", names[1])


def addoption(group, parser) -> None:
    """--junitxml is pytest's own option: nothing to add."""


def target(config) -> str | None:
    return getattr(config.option, "xmlpath", None) or None


def configure(config) -> None:
    config.pluginmanager.register(JunitNames(config), "layer-conformance-junit")


def write(result, path) -> None:
    """pytest's junitxml plugin writes the file; the names were set as each report arrived (JunitNames)."""
    return None


OUTPUT = Output(name="junit", options=("--junitxml",), addoption=addoption, target=target, write=write,
                configure=configure)
