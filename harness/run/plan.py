"""What the collection phase hands on (its stash keys; it is their one writer): the plan, made once before any check
runs, and, in a shard of a split matrix, the node ids the shard deselected. The running and session-end phases and
the gate read them here."""
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
