"""The running phase: each check's item run, its record attached to its report, and every record collected as its
report arrives (from this process or from an xdist worker), in the journal beside the results file as it comes.
What it hands on, once the checks have run, is frozen and stashed (``handover.REPORTED_KEY``); the journal, its own,
it closes at pytest's end, removed where the session's end says the results file holds all it held
(``handover.ENDED_KEY``)."""
from __future__ import annotations

import time

import pytest

from ..record import Record
from .configure import CONFIGURED_KEY, EXECUTORS_KEY, Configured, is_worker
from .executors import Executors
from .handover import ENDED_KEY, REPORTED_KEY, Reported, run_deselected, run_plan
from .records import record_from_nodeid, target_record


_RUNNING_KEY = pytest.StashKey["Running"]()


def blocker_nodeid(nodeid: str, record: Record) -> str:
    """The node id of the check that ``record`` (of the check ``nodeid``) says blocked it: the same target, in the
    cases' own dtype where it was blocked there."""
    target = nodeid.rpartition("::")[0]
    if (record.details or {}).get("blocked_in_own_dtype") and record.dtype:
        target = target.replace(f"-{record.dtype}]", "]")
    return f"{target}::{record.blocked_by}"


class Running:
    """The running phase's hooks and state (registered where the run is active)."""

    def __init__(self, config, run: Configured, executors: Executors):
        self.config, self.run, self.executors = config, run, executors
        self.records: list[Record] = []
        self.journal = None
        self.interrupted: str | None = None
        # (contract, impl, framework) -> {"files", "truncated"}: what each binding's processes saw its code load,
        # from the reports (an xdist worker's too); the results file's `loaded_files`
        self.loaded_files: dict = {}
        self.files_sent: dict = {}              # (contract, framework, spec) -> files already on a report
        config.stash[_RUNNING_KEY] = self
        if not is_worker(config):
            self._stop_on_sigterm()

    def _stop_on_sigterm(self):
        """SIGTERM (a CI runner's cancel or timeout) ends the run the way Ctrl-C does, so that the results
        that exist are written and the rest are marked as not run."""
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return

        def stop(signum, frame):
            self.interrupted = signal.Signals(signum).name
            raise KeyboardInterrupt(f"stopped by {self.interrupted}")
        signal.signal(signal.SIGTERM, stop)

    def pytest_conformance_planned(self, config, plan):
        """Before any check runs: the plan, in the journal beside the results file."""
        if self.run.json_path:
            from ..results import Journal
            self.journal = Journal(self.run.json_path)
            self.journal.plan(list(plan.planned))

    def reported_so_far(self) -> list[Record]:
        """The records so far: the plan's n/a, then those reported."""
        plan = run_plan(self.config)
        return [*(plan.not_applicable if plan is not None else ()), *self.records]

    def pytest_runtest_logreport(self, report):
        """Every check's record, as its report arrives (from this process or from an xdist worker)."""
        record = getattr(report, "conformance", None)
        if record is None and report.failed and report.when in ("call", "???") and "crashed" in str(report.longrepr):
            # an xdist worker died inside this check (abort, segfault): the check is lost, the run goes on
            record = self._record_for_lost_check(report)
        if record is None:
            return
        self.records.append(record)
        if self.journal is not None:
            self.journal.record(record)
        loaded = getattr(report, "conformance_files", None)
        if isinstance(loaded, dict) and isinstance(loaded.get("files"), list):
            entry = self.loaded_files.setdefault((record.contract, record.impl, record.framework),
                                                 {"files": set(), "truncated": False})
            entry["files"].update(f for f in loaded["files"] if isinstance(f, str))
            entry["truncated"] = entry["truncated"] or bool(loaded.get("truncated"))

    def _record_for_lost_check(self, report) -> Record | None:
        """Rebuild a record from the node id alone (the worker that knew more is gone)."""
        lines = str(report.longrepr).strip().splitlines()
        return record_from_nodeid(self.run, report.nodeid, "error",
                                  f"the process running this check died ({lines[-1] if lines else 'crashed'}); "
                                  f"the worker was restarted and the rest of the run continued")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if isinstance(item, ConformanceItem) and item.record is not None and call.when == "call":
            report.conformance = item.record
            loaded = self._loaded_since_last_report(item)
            if loaded is not None:
                report.conformance_files = loaded   # plain data: it travels from an xdist worker as it is
        return report

    def _loaded_since_last_report(self, item) -> dict | None:
        """The files the item's target loaded (Session.loaded_files, its lane's too) not yet on a report of its
        binding: {"files", "truncated"}; None where the target was never loaded (a failed import leaves no record)."""
        target = item.parent.target
        if target.bundled or not target.impl:
            return None
        key = (target.framework, target.impl)
        sessions = self.executors.sessions
        if not any(key in s.loaded_files for s in sessions):
            return None
        files = set().union(*(s.loaded_files.get(key, ()) for s in sessions))
        sent_key = (item.record.contract, *key)
        first = sent_key not in self.files_sent
        sent = self.files_sent.setdefault(sent_key, set())
        new = files - sent
        truncated = any(key in s.files_cut for s in sessions)
        if not (new or first or truncated):
            return None
        sent |= new
        return {"files": sorted(new), "truncated": truncated}

    # a report travels from an xdist worker to the controller as JSON: its record in the record's JSON form
    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, config, report):
        data = yield
        if isinstance(data, dict) and isinstance(data.get("conformance"), Record):
            data["conformance"] = data["conformance"].to_json()
        return data

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(self, config, data):
        report = yield
        if isinstance(getattr(report, "conformance", None), dict):
            report.conformance = Record.from_json(report.conformance)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        """Every check has reported: what the session's end reads."""
        session.config.stash[REPORTED_KEY] = Reported(records=tuple(self.records), loaded_files=self.loaded_files,
                                                      interrupted=self.interrupted)

    def pytest_unconfigure(self, config):
        if self.journal is not None:   # the results file holds what the journal held: it goes once that is written
            ended = config.stash.get(ENDED_KEY, None)
            self.journal.close(remove=bool(ended and ended.journal_superseded))
            self.journal = None


class ConformanceItem(pytest.Item):
    def __init__(self, *, check, **kw):
        super().__init__(**kw)
        self.check = check
        self.record = None

    def _record(self, outcome, message="", **verdict):
        node = self.parent
        self.record = target_record(self.config.stash[CONFIGURED_KEY], node.target, node.contract, node.device,
                                    node.dtype, self.check, outcome=outcome, message=message, nodeid=self.nodeid,
                                    duration=round(time.perf_counter() - self._started, 6), **verdict)

    def runtest(self):
        self._started = time.perf_counter()   # the check's wall time, loading the layer included

        from ..checks import CheckFailed
        from ..boundary import LoadFailed
        from ..boundary.session import UsageProblem
        lane = self.config.stash[EXECUTORS_KEY].lane
        try:
            if lane is not None and self.check in lane.checks:
                verdict, took = lane.verdict(self)
                self._started = time.perf_counter() - took  # the check's own time on the lane, not the wait
            else:
                verdict = self.compute()
        except UsageProblem as exc:  # the binding, not the layer: the run exits 4
            self._record("error", f"usage error: {exc}", usage_error=True)
            raise CheckFailed(self.record.message) from None
        except LoadFailed as exc:
            self._record("error", str(exc))
            raise CheckFailed(self.record.message) from None
        finally:
            if lane is not None:
                lane.ran(self)  # the target's last item here: its lane checks are queued now
        verdict.pop("check")
        self._record(**verdict)   # the runner's verdict: outcome, message and the record's other fields
        if self.record.outcome == "blocked":   # blocked only by a failure this run recorded (verdict.settle)
            from ..verdict import settle
            reported = {r.key(): r for r in self.config.stash[_RUNNING_KEY].reported_so_far()}
            self.record = settle(self.record, reported.get, complete=self._blocker_id() not in self._planned_here(),
                                 elsewhere=lambda _: self._blocker_id() in run_deselected(self.config))
        if self.record.outcome in ("skipped", "blocked"):
            # pytest's skip line (-rs) says n/a as the table does, from the record's one n/a field
            pytest.skip(f"n/a: {self.record.message}" if self.record.status() == "n/a" else self.record.message)
        if self.record.outcome != "passed":
            raise CheckFailed(self.record.message)

    def _blocker_id(self) -> str:
        """The node id of the check that this item's record says blocked it."""
        return blocker_nodeid(self.nodeid, self.record)

    def _planned_here(self) -> set:
        return {i.nodeid for i in self.session.items}

    def compute(self, session=None) -> dict:
        """The runner's verdict for this check: the layer loaded (into ``session``'s executors; default the
        run's) and checked. Raises UsageProblem or LoadFailed where the binding or the import fails."""
        from ..runner import run_check
        ctx = self.parent.context(session)
        return run_check(ctx, self.check, timeout=self.config.getoption("check_timeout"))

    def repr_failure(self, excinfo, style=None):
        msg = getattr(excinfo.value, "message", None) or str(excinfo.value)
        said = f"{self.parent.name}::{self.check} failed: {msg}"
        if self.record is None:
            return said
        from ..reproduce import repro_command
        return f"{said}\nreproduce: {repro_command(self.record, self.config.stash[CONFIGURED_KEY].seed)}"

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{self.check}"
