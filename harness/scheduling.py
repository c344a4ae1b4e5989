"""xdist scheduling: one target's checks stay on one worker (its executor imports the layer once),
and a worker that dies loses only the check it was running.

Targets, not frameworks, are the unit, so the run balances; but a worker is given targets of the
frameworks it already has executors for while there are any, and otherwise those of a framework no
worker has started: each framework's executors (a framework import each) start about once per run,
not once per worker.

xdist's group scheduler puts a crashed worker's unfinished unit back in the queue, crashing
item included, so a layer that aborts the process is run again on every replacement worker until
the restart limit ends the run; and it may hand work to a replacement before that worker has
reported its collection (KeyError). This subclass marks the crashing item done and waits for
the replacement's collection. It also reads the group from the node id itself
(``...::rmsnorm[torch-cpu]::values`` -> ``rmsnorm[torch-cpu]``): xdist marks groups by rewriting
``item._nodeid``, which pytest 9 no longer reads, so ``xdist_group`` marks alone do nothing there.
"""
from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

from .nodeids import parse as parse_nodeid


class FrameworkGroupScheduling(LoadGroupScheduling):
    def remove_node(self, node):
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
        for unit in workload.values():
            if crashitem in unit:
                unit[crashitem] = True  # lost with the worker; never run it again
        self.workqueue.update({scope: unit for scope, unit in workload.items() if self._pending_of({scope: unit})})
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _assign_work_unit(self, node):
        def framework(scope):
            ids = parse_nodeid(scope + "::x")
            return ids["framework"] if ids else None
        mine = {framework(s) for s in self.assigned_work.get(node, {})}
        others = {framework(s) for n, work in self.assigned_work.items() if n is not node for s in work}
        pick = next((s for s in self.workqueue if framework(s) in mine), None)
        if pick is None:
            pick = next((s for s in self.workqueue if framework(s) not in others), None)
        if pick is not None:
            self.workqueue.move_to_end(pick, last=False)  # the base class takes the queue's first unit
        super()._assign_work_unit(node)

    def _split_scope(self, nodeid):
        ids = parse_nodeid(nodeid)
        return nodeid.rpartition("::")[0] if ids else super()._split_scope(nodeid)

    def _reschedule(self, node):
        if node not in self.registered_collections:
            return  # a replacement worker gets work once its collection is in
        super()._reschedule(node)
