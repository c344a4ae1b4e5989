"""The conformance plugin's own hooks, added to pytest by ``layer_conformance.plugin`` (``pytest_addhooks``)."""
from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_conformance_verdict(session, records, planned):
    """The run's verdict, asked once at session finish by the conformance plugin, before any output is written.

    records: the records of the checks that reported (those of planned checks that never did are not among them:
      ``planned`` says they are missing). planned: the node ids the run planned (None under --collect-only).
    Return a ``layer_conformance.outputs.Judgement`` (the gate, ``layer_conformance.gate``, answers with its
    expectations and baseline), or None: the plugin then asks ``layer_conformance.verdict.verdict`` alone and
    pytest's exit status stands. The answer writes nothing into the run: the plugin makes the result every output
    reads from it (``layer_conformance.outputs.Result``).
    """


@pytest.hookspec
def pytest_conformance_planned(config, plan):
    """The run's plan, once made, before any check runs: ``plan`` a ``layer_conformance.run.handover.Plan`` (node ids
    of every check this run executes, the n/a records of those never collected). The collection phase makes it;
    the running phase writes it to the journal beside the results file."""
