"""The session's end: the one place a run ends. The verdict asked once (the gate's, ``pytest_conformance_verdict``,
where it is installed), the records of planned checks that never reported added, every output written from the one
result (layer_conformance.outputs), and the exit status set, once, from ``exitcodes.exit_status``: every other
phase only hands it data. The result is frozen and stashed (``run_result``), what the terminal summary and every
output read."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from .. import outputs
from ..exitcodes import exit_status
from .configure import Configured, is_worker, option
from .executors import Executors
from .handover import ENDED_KEY, REPORTED_KEY, Ended, Plan, Reported, run_plan
from .records import record_from_nodeid

_RESULT_KEY = pytest.StashKey[outputs.Result]()


def run_result(config) -> outputs.Result | None:
    """The run's result (its verdict and records), once the session has finished; every output reads it."""
    return config.stash.get(_RESULT_KEY, None)


class SessionEnd:
    """The session end's hooks (on an xdist worker, only its executors closed)."""

    def __init__(self, config, run: Configured, executors: Executors | None):
        self.config, self.run, self.executors = config, run, executors

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        if self.executors is not None:
            self.executors.close()
        if not self.run.active or is_worker(session.config):   # a worker's run ends in the controller
            return
        # before the gate's verdict and any results file: the contracts, bindings and expectations are still the
        # bytes read before any user code ran, else the run is refused (exit 4, each changed file named): no
        # results, no report: what they would say was decided by files the layer rewrote
        changed = self.run.inputs.changed() if self.run.inputs is not None else []
        result = None
        if changed:
            sys.stderr.write("ERROR: " + "\n".join(changed) + "\n")
            status = exit_status(None, session.exitstatus, inputs_changed=True)
        else:
            result, status = self._finish(session)
        session.exitstatus = status   # the one place it is set
        if result is not None:
            session.config.stash[_RESULT_KEY] = result
            if result.errors:
                sys.stderr.write("\n".join(result.errors) + "\n")

    def _finish(self, session) -> tuple[outputs.Result, int]:
        """The result and the exit status: the verdict asked once, the records of planned checks that never
        reported added, every output written from the one result. Under --collect-only nothing ran: the verdict and
        its lines only (a --changed-since run that selects nothing exits 0), no file."""
        from ..verdict import verdict
        config = session.config
        collect_only = config.option.collectonly
        plan = run_plan(config)
        reports = config.stash.get(REPORTED_KEY, None) or Reported((), {}, None)
        planned = None if collect_only or plan is None else list(plan.planned)
        # as each check reported it, the plan's n/a first: never changed after
        reported = (*(plan.not_applicable if plan is not None else ()), *reports.records)
        judged = config.hook.pytest_conformance_verdict(session=session, records=reported, planned=planned)
        if judged is None:   # the gate is not installed: the verdict alone, pytest's status stands
            judged = outputs.Judgement(verdict(reported, planned))
        records = tuple(judged.verdict.records)
        facts = dict(nothing_selected=self.run.selected_nothing)
        document = None
        if not collect_only:
            not_run, completeness = self._account_for_the_plan(session, plan, reported, reports.interrupted)
            records += tuple(not_run)
            facts.update(incomplete=not completeness["complete"], usage_error=any(r.usage_error for r in records))
            document = _document(self.run, plan, records, completeness, reports.loaded_files,
                                 judged.expectations_added)
        result = outputs.Result(verdict=judged.verdict, records=records, document=document, lines=tuple(judged.lines),
                                baseline=judged.baseline, baseline_name=judged.baseline_name)
        if not collect_only:
            written = outputs.write_files(result, config)
            facts["unwritten"] = bool(result.errors)
            config.stash[ENDED_KEY] = Ended(journal_superseded=bool(not facts["incomplete"] and written.get("json")))
        return result, exit_status(judged.exit_code, session.exitstatus, **facts)

    def _account_for_the_plan(self, session, plan: Plan | None, reported, interrupted) -> tuple[list, dict]:
        """Every planned check has a record: the ones that never reported are marked "not run" (new records, the
        reported ones unchanged); a run whose results do not cover its plan never exits 0 (exit_status)."""
        planned = list(plan.planned) if plan is not None else []
        done = {r.nodeid for r in reported}
        missing = [n for n in planned if n not in done]
        why = (f"interrupted ({interrupted})" if interrupted else
               "interrupted" if session.exitstatus == pytest.ExitCode.INTERRUPTED else "no result came back")
        not_run = [rec for rec in (record_from_nodeid(self.run, nodeid, "error", f"not run: {why}", not_run=True)
                                   for nodeid in missing) if rec is not None]
        return not_run, {"complete": not missing, "planned": len(planned), "not_run": len(missing),
                         **({"interrupted": why} if missing else {})}

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        run = self.run
        if is_worker(config):
            return
        if run.left_out:
            what = "conformance_impl" if option(config, "impl", "conformance_impl") else "conformance_bindings"
            terminalreporter.write_line(
                f"layer conformance: the checks of {what} "
                f"({config.inipath.name if config.inipath else 'the ini file'}) "
                f"are not part of this run (the files given leave them out); `pytest` with no file arguments, "
                f"`pytest .` or `pytest -m conformance` runs them", yellow=True)
        if run.active and run.sandbox is not None and not run.sandbox.namespaces:
            terminalreporter.write_line(f"layer conformance: executors ran without a sandbox "
                                        f"({run.sandbox.describe()})", yellow=True)
        for kept in (self.executors.kept if self.executors is not None else ()):
            from ..boundary import warm
            terminalreporter.write_line(
                f"layer conformance: the {kept['framework']} zygote (pid {kept['pid']}, "
                f"{'kept from an earlier run' if kept['reused'] else 'started by this run'}) stays running for the "
                f"next run (--keep-warm), and ends after {kept['idle_s']:g} s without one; end it now with "
                f"`{warm.command_line()}`", yellow=True)
        result = run_result(config)
        if result is not None:
            outputs.write_terminal(result, terminalreporter)   # the table, where each output went, the gate's lines


def _document(run: Configured, plan: Plan | None, records, completeness, loaded_files, expectations_added) -> dict:
    """The results document every file output writes (layer_conformance.results.document)."""
    from .. import results
    env = results.environment(run.frameworks(), results.devices_of(records), run.seed,
                              sandbox=run.sandbox.describe() if run.sandbox is not None else None)
    selection = getattr(run.targets, "selection", None)   # --changed-since: what changed, what was selected
    if selection is not None and expectations_added is not None:
        selection = dict(selection, expectations_added=expectations_added)   # what the gate listed
    extra = dict(completeness or {}, **({"selection": selection} if selection is not None else {}))
    loaded = _loaded_table(loaded_files)   # what a later --changed-since --baseline selects by
    if loaded:
        extra["loaded_files"] = loaded
    return results.document(records, env, extra, plan=list(plan.planned) if plan is not None else None)


def _loaded_table(loaded_files: dict) -> list[dict]:
    """The results file's `loaded_files`: per binding the files its processes saw it load, relative to the git top
    level where inside it (a baseline made in another checkout matches), the judge's own temporary files left out."""
    import subprocess
    import tempfile
    try:
        top = os.path.realpath(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                                              text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        top = None
    temp = {os.path.realpath(tempfile.gettempdir()), "/tmp"}

    def shown(path: str) -> str | None:
        # the directory resolved, not the file: a symbolic link keeps its own name (its target is listed too)
        p = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if top and (p + os.sep).startswith(top + os.sep):
            return Path(p).relative_to(top).as_posix()
        if any(p.startswith(os.path.join(t, "conformance-")) for t in temp):
            return None   # an export directory, a compilation cache, the sandbox's shared directory
        return p
    out = []
    for (contract, impl, framework), entry in sorted(loaded_files.items()):
        files = sorted({f for f in map(shown, entry["files"]) if f is not None})
        out.append({"contract": contract, "impl": impl, "framework": framework, "files": files,
                    **({"truncated": True} if entry["truncated"] else {})})
    return out
