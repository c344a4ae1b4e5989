"""The gate's pytest hooks: the verdict asked (``layer_conformance.verdict``: expectations, baseline, exit
status) and said, the expectations file rewritten. The conformance plugin asks the gate once, at session finish
(``pytest_conformance_verdict``, layer_conformance.hookspecs), and makes the result every output reads from the
answer; the gate writes into no other plugin's state. The conformance plugin's run is read through its public
accessors (``layer_conformance.plugin.current_run``, ``layer_conformance.plugin.option``). The gate hands the
verdict on; the run's exit status is set from it in one place (``layer_conformance.exitcodes.exit_status``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from .. import results
from ..exitcodes import verdict_decides
from ..outputs import Judgement
from ..plugin import blocker_nodeid, current_run, option, run_deselected
from ..record import Record
from ..verdict import Verdict, excuse, verdict
from .expectations import (Expectation, ExpectationsError, added_since, expectations_at, first_line,
                           load_expectations, updated_expectations, write_expectations)


class Gate:
    """Per-process gate state (one per pytest config)."""

    def __init__(self, config):
        self.config = config
        self.expectations_path = (config.getoption("expectations") or config.getini("conformance_expectations")
                                  or None)
        self.strict = bool(config.getoption("strict_expectations") or config.getini("conformance_strict_expectations"))
        self.update = bool(config.getoption("update_expectations"))
        self.strict_na = bool(config.getoption("strict_na") or config.getini("conformance_strict_na"))
        # command line only (no ini key): a pull request that edits the project's configuration cannot turn it on
        self.allow_glob = bool(config.getoption("allow_glob_expectations"))
        self.baseline_path = config.getoption("baseline")
        self.expectations: list[Expectation] = []
        self.baseline: dict | None = None         # a results document (layer_conformance.results.load)
        self.failed_nodeids: set = set()   # every failed test report, conformance or not
        if self.update and not self.expectations_path:
            raise pytest.UsageError("--update-expectations needs --expectations FILE (the file to rewrite)")
        if self.expectations_path and not (self.update and not Path(self.expectations_path).exists()):
            try:
                self.expectations = load_expectations(self.expectations_path, self.allow_glob)
            except ExpectationsError as exc:
                raise pytest.UsageError(str(exc)) from None
        if self.baseline_path and not _is_worker(config):
            try:
                self.baseline = results.load(self.baseline_path)
            except results.ResultsFileError as exc:
                raise pytest.UsageError(f"--baseline {exc}") from None

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed_nodeids.add(report.nodeid)


_GATE_KEY = pytest.StashKey[Gate]()


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_addoption(parser):
    g = parser.getgroup("conformance", "layer conformance")
    g.addoption("--expectations", metavar="FILE", help="YAML file of expected failures (each with a reason)")
    g.addoption("--strict-expectations", action="store_true", default=False,
                help="an expected failure that now passes fails the run")
    g.addoption("--update-expectations", action="store_true", default=False,
                help="rewrite the --expectations file from this run, keeping existing reasons")
    g.addoption("--allow-glob-expectations", action="store_true", default=False,
                help="let expectations entries be globs (e.g. check: \"*\") and leave out check; without it "
                     "an entry names the exact check it excuses")
    g.addoption("--strict-na", action="store_true", default=False,
                help="an n/a that rests on the layer's own word (not on the contract or the framework's known "
                     "limits) fails the run unless an expectations entry accepts it (expected: n/a)")
    g.addoption("--baseline", metavar="OLD.json",
                help="a previous results file: fail only on regressions against it")
    g.addoption("--changed-since-ignore", action="append", default=[], metavar="GLOB",
                help="with --changed-since: a changed file (path from the repository's top level, or a directory "
                     "above it) that GLOB matches does not select the bindings that import a module from a "
                     "directory above it; an import or a file the --baseline saw read still selects; repeatable")
    g.addoption("--accept-reference-change", action="store_true", default=False,
                help="with --changed-since: run the bindings whose contract's reference implementation (its "
                     "module or a module it imports inside the repository) the change alters, once a reviewer "
                     "approved that change; without it such a run stops (exit 3). Command line only: a pull "
                     "request cannot turn it on in its own configuration")
    parser.addini("conformance_changed_since_ignore", "default --changed-since-ignore values (not applied where "
                  "the branch changes the file that sets them)", type="linelist", default=[])
    parser.addini("conformance_expectations", "default --expectations", type="string", default=None)
    parser.addini("conformance_strict_expectations", "default --strict-expectations", type="bool", default=False)
    parser.addini("conformance_strict_na", "default --strict-na", type="bool", default=False)


def pytest_configure(config):
    gate = Gate(config)
    config.stash[_GATE_KEY] = gate
    config.pluginmanager.register(gate, "layer_conformance_gate_state")  # its hooks see this config only


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # outermost wrapper: the conformance plugin has attached the record by the time this resumes
    report = yield
    record = getattr(report, "conformance", None)
    gate = item.config.stash.get(_GATE_KEY, None)
    if record is None or gate is None or not gate.expectations or call.when != "call":
        return report
    # the report is shown as the entry says (x, X); the record stays as the check left it: the verdict applies
    # the entries to every record at the end (layer_conformance.verdict), those of crashed checks included
    what, exp = excuse(record, gate.expectations) or (None, None)
    reason = "; ".join(filter(None, [exp.reason, exp.link])) if exp is not None else ""
    if what == "expected" and report.failed:
        report.outcome = "skipped"   # pytest's own xfail: shown as 'x', counted as xfailed
        report.wasxfail = reason
    elif what == "unexpectedly_passed" and report.passed:
        if gate.strict:
            report.outcome = "failed"
            report.longrepr = f"[XPASS(strict)] {record.describe()}: expected to fail ({reason})"
        else:
            report.wasxfail = reason
    return report


def _scope(run, config):
    """Which baseline checks this run was asked to run: only those can have disappeared. The bundled
    matrix covers every framework unless --framework narrows it, so a framework that stopped importing
    shows up. --bindings covers every framework too (a framework whose last binding was removed shows up;
    --framework narrows it); --impl covers its one implementation. Under --changed-since the bindings
    the change did not touch are out of scope; a binding removed from the file is not one of them."""
    impl = option(config, "impl", "conformance_impl") or None
    asked = set(option(config, "framework", "conformance_framework") or [])
    if impl:
        frameworks = {t.framework for t in run.targets}
    elif asked:
        frameworks = asked | {t.framework for t in run.targets}
    else:
        frameworks = None
    contracts = None
    if option(config, "contract", "conformance_contract") and not option(config, "bindings", "conformance_bindings"):
        contracts = {Path(t.contract_path).stem for t in run.targets}
        contracts |= {c.name for c in getattr(run, "contracts", {}).values()}
    untouched = _untouched(run, config)

    def in_scope(r: Record):
        return ((frameworks is None or r.framework in frameworks) and r.device in run.devices
                and r.check in run.checks and (contracts is None or r.contract in contracts)
                and (not impl or r.impl == impl)
                and not any(r.impl == i and r.contract in names for i, names in untouched))
    return in_scope


def _untouched(run, config) -> list:
    """(impl, contract names) of each binding --changed-since left out: the harness chose not to run them."""
    return (getattr(run.targets, "untouched", None) or []) if config.getoption("changed_since") else []


def _selection_lines(selection: dict, say) -> None:
    """What --changed-since selected and why, or, when nothing, why no changed file maps to a binding."""
    rev, files = selection["changed_since"], selection["changed_files"]
    n = f"{len(files)} file{'' if len(files) == 1 else 's'} changed"
    if selection["selected"]:
        say((f"changed since {rev}: {n}; {len(selection['selected'])} binding(s) selected, "
             f"{selection['untouched']} untouched", {}))
        for s in selection["selected"]:
            say((f"  {s['contract']} {s['impl']}: {'; '.join(s['because'])}", {}))
        for c in selection.get("reference_changed") or []:   # only ever accepted here: else the run stopped
            say((f"  the reference implementation {c['reference']} of {c['contract']} changed in this change "
                 f"({', '.join(c['files'])}): accepted by --accept-reference-change", {"bold": True}))
        return
    shown = list(selection["unmapped"].items())
    if any(why.startswith("the bindings file") for _, why in shown):
        say((f"no layer changed since {rev}: {n}, none selects a binding (the bindings file only removes "
             f"entries)", {"bold": True}))
    else:
        say((f"no layer changed since {rev}: {n}, none is an implementation, a contract, a module they import, "
             f"or the bindings file", {"bold": True}))
    for f, why in shown[:20]:
        say((f"  {f}: {why}", {}))
    if len(shown) > 20:
        say((f"  ... and {len(shown) - 20} more (the results file's `selection` lists them all)", {}))


def _merge_base(rev: str, selection, cwd) -> str:
    """Where the branch left ``rev`` (as a pull request sees it; the selection's, where --bindings made one)."""
    import subprocess
    if selection and selection.get("merge_base"):
        return selection["merge_base"]
    done = subprocess.run(["git", "-C", str(cwd), "merge-base", rev, "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else rev


def _added_lines(gate, rev, selection, say) -> list[dict]:
    """Under --changed-since: every expectations entry the branch added since the base, before the verdict, so
    that an excuse written beside the layer it excuses is read in the review; returned for the results file
    (its ``selection.expectations_added``)."""
    import subprocess
    path = gate.expectations_path
    try:
        base = _merge_base(rev, selection, Path(path).resolve().parent)
        old = expectations_at(base, path)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        detail = (getattr(exc, "stderr", None) or b"")
        detail = (detail.decode() if isinstance(detail, bytes) else detail).strip() or str(exc)
        say((f"warning: cannot read {path} as it was at {rev} ({detail}): every entry is listed as added",
             {"yellow": True}))
        old = []
    added = added_since(gate.expectations, old)
    if not added:
        say((f"expectations added since {rev}: none ({path})", {}))
        return []
    say((f"expectations added since {rev}: {len(added)} entr{'y' if len(added) == 1 else 'ies'} in {path}, each "
         f"excusing the failures it matches (review them with the change)", {"bold": True, "yellow": True}))
    for e in added:
        say((f"  + {e.where}: {e.describe()}", {"yellow": True}))
    return [{**e.as_yaml(), "where": e.where} for e in added]


@pytest.hookimpl(optionalhook=True)
def pytest_conformance_verdict(session, records, planned):
    """The run's verdict with the expectations and the baseline (layer_conformance.hookspecs): asked once by the
    conformance plugin at session finish; it writes the expectations file (--update-expectations) and nothing
    of the run."""
    config = session.config
    gate, run = config.stash.get(_GATE_KEY, None), current_run(config)
    if gate is None or run is None or _is_worker(config):
        return None
    lines: list[tuple[str, dict]] = []   # the terminal's, (text, markup)
    say = lines.append
    selection = getattr(run.targets, "selection", None)
    if selection is not None:
        _selection_lines(selection, say)
    rev = config.getoption("changed_since")
    added = None
    if rev and gate.expectations_path:
        added = _added_lines(gate, rev, selection, say)
    recorded, counts = [], None
    if gate.update:
        entries, counts = updated_expectations(gate.expectations, records, config.rootpath)
        write_expectations(gate.expectations_path, entries)
        # the run's purpose is done once every failure is recorded: they are the file's expected failures now
        recorded = load_expectations(gate.expectations_path, gate.allow_glob)
    # a --changed-since run that selected nothing collects nothing (pytest's 5); it is still gated:
    # against the baseline (a removed binding), and its summary says why nothing was selected
    nothing_selected = run.selected_nothing and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
    judged = _verdict(gate, run, config, records, planned, recorded)
    if gate.expectations:
        _expectations_lines(gate, judged, say)
    if gate.update:
        say((f"updated {gate.expectations_path}: {counts['kept'] + counts['added']} entries ({counts['kept']} kept, "
             f"{counts['dropped']} dropped as now passing, {counts['added']} added)", {}))
        say(("gate: this run's failures are recorded as expected; they do not fail it", {}))
    if judged.comparison is not None:
        _baseline_lines(gate, judged.comparison, say)
    # pytest's own status stands where it is no 0 or 1 (interrupted, a broken contract, a usage error): the
    # verdict's lines are said where its code is the run's (exitcodes.exit_status decides it from the same facts)
    if verdict_decides(session.exitstatus, run.selected_nothing):
        if nothing_selected and judged.passed:
            say(("gate: no layer to check: exit 0 (the lines above say why no changed file selects a binding)",
                 {"green": True}))
        elif lines or judged.layer_na:   # a plain run (no gate option, no n/a to list) keeps pytest's own summary
            lines += judged.lines()
    return Judgement(verdict=judged, exit_code=judged.exit_code, lines=tuple(lines), baseline=gate.baseline,
                     baseline_name=gate.baseline_path, expectations_added=added)


def _verdict(gate, run, config, records, planned, recorded=()) -> Verdict:
    """The verdict (``layer_conformance.verdict``) on this run: pytest's own count cannot see expectations
    applied to a check whose worker crashed, nor a baseline."""
    untouched = _untouched(run, config)
    return verdict(records, planned, expectations=gate.expectations,
                   baseline=gate.baseline["results"] if gate.baseline is not None else None,
                   strict=gate.strict, strict_na=gate.strict_na, elsewhere=_elsewhere(config),
                   in_scope=_scope(run, config) if gate.baseline is not None else None,
                   other_failures=gate.failed_nodeids, recorded=recorded,
                   # --changed-since left the untouched bindings out on purpose: an entry about one is not stale
                   left_out=lambda e: any(e.could_match(contract=names, impl=impl) for impl, names in untouched))


def _elsewhere(config):
    """verdict's ``elsewhere``: a blocked record whose blocker this run deselected (a shard's: pytest-split) stays
    blocked, for ``merge --gate`` to settle with both records."""
    deselected = run_deselected(config)
    return (lambda r: bool(r.nodeid) and blocker_nodeid(r.nodeid, r) in deselected) if deselected else None


def _expectations_lines(gate, judged: Verdict, say) -> None:
    n_expected = len(judged.excused) - len(judged.recorded)
    say((f"expectations {gate.expectations_path}: {n_expected} expected failure(s) (xfail), "
         f"{len(judged.xpassed)} expected failure(s) now passing", {}))
    for r in judged.xpassed:
        say((f"  now passing: {r.describe()} (expected to fail: {r.expectation.get('where')}"
             f"{'; fails the run under --strict-expectations' if gate.strict else ''})", {"yellow": True}))
    nothing = [e for e in judged.stale if not any(e.matches(r) for r in judged.records)]
    for e in judged.stale:
        what = "matches no check in this run" if e in nothing else "no longer fails (its checks pass or are skipped)"
        fields = ", ".join(f"{k}={v}" for k, v in e.patterns.items())
        say((f"  {'error' if gate.strict else 'warning'}: {e.where}: the entry for {fields} {what}",
             {"red" if gate.strict else "yellow": True}))


def _baseline_lines(gate, comparison, say) -> None:
    say((f"baseline {gate.baseline_path}: {comparison.summary()}", {"bold": True}))
    for old, new in comparison.newly_failing:
        tag = "expected" if new.expected else "REGRESSION"
        was = f"{old.outcome} -> {new.outcome}" if old else f"{new.outcome} (not in the baseline)"
        # the root failure whole: its hint, at the end, says what to do
        say((f"  {tag}: {new.describe()}: {was}: {first_line(new.message, limit=None)}",
             {"red": tag == "REGRESSION", "yellow": tag != "REGRESSION"}))
        for _, blocked in comparison.blocked_under(new):
            say((f"    newly blocked by it: {blocked.describe()}: passed -> blocked", {}))
    for old, new in comparison.newly_skipped:
        say((f"  REGRESSION: {new.describe()}: passed -> {new.outcome}: {first_line(new.message)}",
             {"red": True}))
    for old in comparison.disappeared:
        say((f"  REGRESSION: {old.describe()}: {old.outcome} in the baseline, not run now", {"red": True}))
    for old, new in comparison.newly_passing:
        say((f"  fixed: {new.describe()}: {old.outcome} -> passed", {"green": True}))
