"""A second lane for one process's run (-n 0): the longest checks run on a thread, against a second set
of layer executors, while the main thread runs the others.

With -n 0 one check runs at a time and a core stays mostly idle (the judge waits on one executor). The
checks in ``checks.ALONGSIDE`` (compiled, export) take about as long as all the others together, read
nothing the others write, and each builds its own layers: they are queued here when the run's first
check has run, and their items, collected last, only collect the verdicts. A verdict is the one the main thread would give: the same check, on the
same target, through the same ``run_check``; the lane's executors are as fresh as the main thread's (a
target is loaded into a clean process), and share only the zygotes and each target's own cache.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor


class Lane:
    def __init__(self, session, checks, rank):
        """``rank(framework)``: where the main thread runs the framework's checks (lower first)."""
        self.session = session.lane()
        self.checks = tuple(checks)
        self._rank = rank
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="conformance-lane")
        self._jobs: dict[tuple[str, str], Future] = {}
        self._items: dict[tuple[str, str], object] = {}  # (target node id, check) -> its item
        self._planned = False

    def plan(self, items) -> None:
        """Queue every target's lane checks (the run's final items, after deselection), the frameworks the main
        thread runs last first: the lane works on them while the main thread runs the first frameworks' other
        checks, and reaches the first frameworks once their other checks have run (JAX's compiled check then
        finds the programs they compiled in the target's cache)."""
        self._planned = True
        mine = [i for i in items if i.check in self.checks]
        for item in sorted(mine, key=lambda i: -self._rank(i.parent.target.framework)):  # stable within one
            self._items[(item.parent.nodeid, item.check)] = item
            self._submit(item.parent.nodeid, item.check)

    def ran(self, item) -> None:
        """The main thread ran ``item``: at the first, the lane's work is queued."""
        if not self._planned:
            self.plan([i for i in item.session.items if hasattr(i, "check")])

    def verdict(self, item):
        """(``item.compute(session)``, seconds it took); what it raised is raised here. Computed on the lane or,
        while the main thread waits for it (the main thread is done with the other checks, the lane still has a
        queue), on the main thread's own executors: the main thread takes the queue's last job the lane has not
        begun, so that both cores work on the queue. The same verdict either way."""
        key = (item.parent.nodeid, item.check)
        self._items.setdefault(key, item)
        job = self._submit(*key)
        while not job.done():
            if job.cancel():  # not begun: computed here
                return self._here(key).result()
            if not self._take_last():
                break
        return job.result()

    def _take_last(self) -> bool:
        """The last queued job the lane has not begun, computed on the main thread (False: none left)."""
        for key in reversed(list(self._jobs)):
            if not self._jobs[key].done() and self._jobs[key].cancel():
                self._here(key)
                return True
        return False

    def _here(self, key) -> Future:
        """The job ``key`` (cancelled on the lane) computed on the main thread's executors."""
        done: Future = Future()
        try:
            done.set_result(_timed(self._items[key].compute, None))
        except Exception as exc:  # raised when its item comes (UsageProblem, LoadFailed)
            done.set_exception(exc)
        self._jobs[key] = done
        return done

    def _submit(self, target: str, check: str) -> Future:
        key = (target, check)
        if key not in self._jobs:
            self._jobs[key] = self._pool.submit(_timed, self._items[key].compute, self.session)
        return self._jobs[key]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.session.abort()  # a check still running on the lane ends now (its executors are killed)
        self._pool.shutdown(wait=True)
        self.session.close()


def _timed(compute, session):
    started = time.perf_counter()
    return compute(session), time.perf_counter() - started
