"""What one phase hands a later one: frozen, each under a stash key of its own that one phase writes and the later
ones (and the gate) read.

- ``PLAN_KEY``, ``DESELECTED_KEY``: the collection phase's (layer_conformance.run.collection): the plan, made once
  before any check runs, and, in a shard of a split matrix, the node ids the shard deselected;
- ``REPORTED_KEY``: the running phase's (layer_conformance.run.running): every check's record, once all reported;
- ``ENDED_KEY``: the session end's (layer_conformance.run.session_end): whether the results file holds all the
  journal held (the running phase, the journal's owner, then removes it).

The configure phase's ``Configured`` is in layer_conformance.run.configure (``CONFIGURED_KEY``)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class Plan:
    planned: tuple          # node ids of every conformance check this run will execute
    not_applicable: tuple   # the n/a records of the checks never collected (decided from the contracts)


PLAN_KEY = pytest.StashKey[Plan]()
DESELECTED_KEY = pytest.StashKey[frozenset]()


def run_plan(config) -> Plan | None:
    """The run's plan, once made (None before, under --collect-only with xdist, and on an xdist worker)."""
    return config.stash.get(PLAN_KEY, None)


def run_deselected(config) -> frozenset:
    """In a shard of a split matrix (pytest-split's --splits), the node ids it deselected: the other shards' share,
    so a blocked check whose blocker is among them waits for ``merge --gate``. Empty in any other run: a check
    deselected with -k or -m runs nowhere, and what it would block fails with its own symptom."""
    try:
        sharded = bool(config.getoption("splits"))
    except ValueError:   # pytest-split is not installed
        sharded = False
    return config.stash.get(DESELECTED_KEY, frozenset()) if sharded else frozenset()


@dataclass(frozen=True)
class Reported:
    records: tuple            # every check's record, in the order the reports came
    loaded_files: dict        # (contract, impl, framework) -> {"files": set, "truncated": bool}, from the reports
    interrupted: str | None   # the signal that ended the run early


@dataclass(frozen=True)
class Ended:
    journal_superseded: bool  # the results file holds all the journal held: it goes


REPORTED_KEY = pytest.StashKey[Reported]()
ENDED_KEY = pytest.StashKey[Ended]()
