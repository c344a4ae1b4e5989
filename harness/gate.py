"""The CI gate (expectations, baselines) and the HTML report options: a second pytest plugin.

Exit codes of a conformance run (pytest's numbering where the meanings overlap):

* 0 -- conformant: every check passed, was skipped, or failed as an expectations entry says it
  will; with ``--baseline``: no regressions against the baseline. A ``--changed-since`` run that
  selects nothing exits 0 (not pytest's 5) with lines saying why no changed file selects a binding,
  unless a baseline binding was removed.
* 1 -- a check failed or errored without an expectations entry; with ``--baseline``: a regression
  only, i.e. a check that fails or errors now but did not in the baseline (it passed there, was
  skipped, or is new) and has no expectations entry, a check that passed in the baseline and is
  skipped now, or a baseline record (any outcome) that this run did not produce; under
  ``--strict-expectations`` also an expected failure that now passes, and an entry that matches no
  check or whose checks no longer fail.
* 2 -- interrupted (pytest's own: Ctrl-C, a collection error that is not a contract).
* 3 -- broken contract: a contract file could not be loaded.
* 4 -- usage error: bad options, a malformed expectations file, an unreadable baseline.
* 5 -- nothing was collected (pytest's own).

An expectations file (``--expectations FILE``) lists known failures::

    expectations:
      - contract: rmsnorm            # every key is a glob; a missing key matches anything, but an
                                     # entry names at least one of contract/impl/framework/device/check
        impl: "mypkg.layers:*"
        framework: tensorflow
        check: serialization
        expected: fail               # fail (= failed or error), failed, error, or a list of these
        reason: keras 3 drops the gain on reload    # reason or link is required
        link: https://example.org/issues/12
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

KEY_FIELDS = ("contract", "impl", "framework", "device", "check")
FAILING = ("failed", "error")
_EXPECTED_SPELLINGS = {"fail": FAILING, "failed": ("failed",), "error": ("error",)}

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_CONTRACT, EXIT_USAGE = 0, 1, 2, 3, 4


def record_key(r: dict) -> tuple:
    return tuple(str(r.get(k, "")) for k in KEY_FIELDS)


# --- expectations ---------------------------------------------------------------------------

class ExpectationsError(Exception):
    """A malformed expectations file; the message names the file, the line and the field."""


@dataclass
class Expectation:
    patterns: dict               # field -> glob, only the fields the entry names
    outcomes: tuple              # the outcomes it expects, e.g. ("failed", "error")
    expected: object             # as written (kept when the file is rewritten)
    reason: str = ""
    link: str = ""
    line: int = 0
    path: str = ""

    def matches(self, record: dict) -> bool:
        return all(fnmatch.fnmatchcase(str(record.get(k, "")), p) for k, p in self.patterns.items())

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def as_record_note(self) -> dict:
        return {k: v for k, v in (("reason", self.reason), ("link", self.link), ("where", self.where)) if v}

    def as_yaml(self) -> dict:
        out = dict(self.patterns)
        out["expected"] = self.expected
        if self.reason:
            out["reason"] = self.reason
        if self.link:
            out["link"] = self.link
        return out


def _fail(path, node, field_, message):
    line = node.start_mark.line + 1 if node is not None else "?"
    raise ExpectationsError(f"invalid expectations file {path}:{line}: {field_}: {message}")


def _scalar(path, key, node) -> str:
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:null" or node.value == "":
        _fail(path, node, key, "expected a non-empty string" + (" (omit the field to match anything)"
                                                                  if key in KEY_FIELDS else ""))
    return node.value


def _expected(path, node):
    if isinstance(node, yaml.ScalarNode):
        words, written = [node.value], node.value
    elif isinstance(node, yaml.SequenceNode) and node.value:
        words = [_scalar(path, "expected", n) for n in node.value]
        written = words
    else:
        _fail(path, node, "expected", "expected fail, failed, error, or a list of failed/error")
    outcomes: list = []
    for w in words:
        if w not in _EXPECTED_SPELLINGS:
            _fail(path, node, "expected", f"{w!r} is not an outcome that can be expected "
                                          f"(use fail, failed, error, or a list of failed/error)")
        outcomes += [o for o in _EXPECTED_SPELLINGS[w] if o not in outcomes]
    return tuple(outcomes), written


def load_expectations(path) -> list[Expectation]:
    """Parse an expectations file; ExpectationsError names file:line: field on any problem."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ExpectationsError(f"expectations file {path}: cannot read: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ExpectationsError(f"invalid expectations file {path}:{mark.line + 1 if mark else '?'}: "
                                f"(yaml): {getattr(exc, 'problem', None) or exc}") from None
    if root is None:
        return []
    entries = root
    if isinstance(root, yaml.MappingNode):
        entries = None
        for k, v in root.value:
            if k.value != "expectations":
                _fail(path, k, k.value, "unknown top-level key (the file holds `expectations:` and a list)")
            entries = v
        if entries is None or (isinstance(entries, yaml.ScalarNode) and entries.tag.endswith(":null")):
            return []
    if not isinstance(entries, yaml.SequenceNode):
        _fail(path, entries, "expectations", "expected a list of entries")
    out = []
    for node in entries.value:
        if not isinstance(node, yaml.MappingNode):
            _fail(path, node, "(entry)", "expected a mapping of contract/impl/framework/device/check, "
                                         "expected and reason")
        seen: dict = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else "?"
            if key in seen:
                _fail(path, k, key, "given twice in one entry")
            if key not in KEY_FIELDS + ("expected", "reason", "link"):
                _fail(path, k, key, f"unknown field (known: {', '.join(KEY_FIELDS)}, expected, reason, link)")
            seen[key] = v
        if "expected" not in seen:
            _fail(path, node, "expected", "required (fail, failed, error, or a list of failed/error)")
        if not any(k in seen for k in KEY_FIELDS):
            _fail(path, node, "(entry)", "names none of contract, impl, framework, device or check, so it would "
                                         "match every check; name at least one (`check: \"*\"` says every check "
                                         "on purpose)")
        outcomes, written = _expected(path, seen["expected"])
        texts = {k: _scalar(path, k, seen[k]) for k in ("reason", "link") if k in seen}
        if not texts:
            _fail(path, node, "reason", "required: say why the failure is expected (or give a `link`)")
        out.append(Expectation(patterns={k: _scalar(path, k, seen[k]) for k in KEY_FIELDS if k in seen},
                               outcomes=outcomes, expected=written, reason=texts.get("reason", ""),
                               link=texts.get("link", ""), line=node.start_mark.line + 1, path=path))
    return out


def expectation_for(expectations: list[Expectation], record: dict) -> Expectation | None:
    """The entry that covers this record's outcome, else the first that matches it at all."""
    matching = [e for e in expectations if e.matches(record)]
    covering = [e for e in matching if record.get("outcome") in e.outcomes]
    return (covering or matching or [None])[0]


def annotate(record: dict, expectations: list[Expectation]) -> str | None:
    """Mark a record 'expected' (a covered failure) or 'unexpectedly_passed'; returns which, or None."""
    exp = expectation_for(expectations, record)
    if exp is None:
        return None
    if record.get("outcome") in exp.outcomes:
        record["expected"] = True
        record["expectation"] = exp.as_record_note()
        return "expected"
    if record.get("outcome") == "passed":
        record["unexpectedly_passed"] = True
        record["expectation"] = exp.as_record_note()
        return "unexpectedly_passed"
    return None


def unmatched(expectations: list[Expectation], records: list[dict]) -> list[Expectation]:
    return [e for e in expectations if not any(e.matches(r) for r in records)]


def stale_expectations(expectations: list[Expectation], records: list[dict]):
    """(entries matching no check of this run, entries whose checks ran and none fails as expected)."""
    nothing, not_failing = [], []
    for e in expectations:
        mine = [r for r in records if e.matches(r)]
        if not mine:
            nothing.append(e)
        elif not any(r.get("outcome") in e.outcomes for r in mine):
            not_failing.append(e)
    return nothing, not_failing


def updated_expectations(expectations: list[Expectation], records: list[dict]) -> tuple[list[dict], dict]:
    """The file's new entries: existing ones still needed (reasons kept), stale ones dropped, one exact
    entry added per failing check that nothing covers. Entries matching nothing in this run are kept
    (they may be about frameworks or devices this run did not cover)."""
    kept, dropped = [], []
    for e in expectations:
        mine = [r for r in records if e.matches(r)]
        stale = mine and not any(r.get("outcome") in e.outcomes for r in mine) \
            and any(r.get("outcome") == "passed" for r in mine)
        (dropped if stale else kept).append(e)
    added = []
    today = datetime.now(timezone.utc).date().isoformat()
    for r in sorted(records, key=record_key):
        if r.get("outcome") in FAILING and not any(e.matches(r) and r["outcome"] in e.outcomes for e in kept):
            first = _first_line(r.get("message")) or r["outcome"]
            added.append({**{k: str(r[k]) for k in KEY_FIELDS}, "expected": "fail",
                          "reason": f"recorded by --update-expectations on {today}: {first}"})
    entries = [e.as_yaml() for e in kept] + added
    return entries, {"kept": len(kept), "dropped": len(dropped), "added": len(added)}


def write_expectations(path, entries: list[dict]) -> None:
    header = ("# Known conformance failures: each entry's keys are globs (a missing key matches anything);\n"
              "# `expected` is fail, failed, error or a list; every entry needs a reason or a link.\n")
    body = yaml.safe_dump({"expectations": entries}, sort_keys=False, default_flow_style=False,
                          allow_unicode=True, width=110)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(header + body)


# --- baseline comparison ------------------------------------------------------------------

class BaselineError(Exception):
    pass


def load_results_file(path) -> dict:
    from .results import SCHEMA_VERSION
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BaselineError(f"{path}: not a results file (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise BaselineError(f"{path}: not a results file (no `results` list)")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise BaselineError(f"{path}: unsupported results schema_version {doc.get('schema_version')!r}")
    return doc


@dataclass
class Comparison:
    """The difference between a baseline's records and this run's, by (contract, impl, framework, device, check).

    A baseline tolerates the failures it already has: a check that fails now counts as newly failing
    unless it failed (or errored) in the baseline too -- whether it passed there, was skipped, or is new.
    A check that passed in the baseline and is skipped now (n/a included) is newly skipped: a check that
    no longer checks anything. A skip on both sides (an n/a with its reason, a missing GPU) is no change.
    """
    newly_failing: list = field(default_factory=list)      # (old or None, new): failing now, not before
    newly_passing: list = field(default_factory=list)      # (old, new): failed/error -> passed
    unchanged_failing: list = field(default_factory=list)  # (old, new): failing in both
    newly_skipped: list = field(default_factory=list)      # (old, new): passed -> skipped or blocked
    disappeared: list = field(default_factory=list)        # old: in the baseline (any outcome), not in this run

    @property
    def regressions(self) -> list[dict]:
        """What fails the gate: newly failing checks without an expectations entry, newly skipped ones,
        and vanished ones."""
        return ([new for _, new in self.newly_failing if not new.get("expected")]
                + [new for _, new in self.newly_skipped] + list(self.disappeared))

    def summary(self) -> str:
        text = (f"{len(self.newly_failing)} newly failing, {len(self.newly_passing)} newly passing, "
                f"{len(self.unchanged_failing)} unchanged failing")
        if self.newly_skipped:
            text += f", {len(self.newly_skipped)} newly skipped"
        extra = []
        unknown = sum(old is None for old, _ in self.newly_failing)
        if unknown:
            extra.append(f"{unknown} of the newly failing not in the baseline")
        expected = sum(bool(new.get("expected")) for _, new in self.newly_failing)
        if expected:
            extra.append(f"{expected} of the newly failing expected")
        if self.disappeared:
            extra.append(f"{len(self.disappeared)} baseline check(s) no longer run")
        return text + (f" ({'; '.join(extra)})" if extra else "")

    def changes(self) -> dict[tuple, tuple[str, str | None]]:
        """key -> (label, baseline outcome or None) for every record of this run that changed or still fails."""
        out = {}
        for label in ("newly_failing", "newly_skipped", "newly_passing", "unchanged_failing"):
            for old, new in getattr(self, label):
                out[record_key(new)] = (label, old["outcome"] if old else None)
        return out


def compare(baseline: list[dict], current: list[dict], in_scope=None) -> Comparison:
    """Compare records; ``in_scope(old_record)`` limits which baseline checks count as disappeared."""
    old = {record_key(r): r for r in baseline}
    new = {record_key(r): r for r in current}
    c = Comparison()
    for k in sorted(new):
        n, o = new[k], old.get(k)
        was, now = (o or {}).get("outcome"), n.get("outcome")
        if now in FAILING:
            (c.unchanged_failing if was in FAILING else c.newly_failing).append((o, n))
        elif now == "passed" and was in FAILING:
            c.newly_passing.append((o, n))
        elif now in ("skipped", "blocked") and was == "passed":
            c.newly_skipped.append((o, n))   # blocked: not judged any more, whatever blocks it
    # whatever the outcome was: a check that no longer runs can no longer be gated
    for k in sorted(set(old) - set(new)):
        if in_scope is None or in_scope(old[k]):
            c.disappeared.append(old[k])
    return c


def _first_line(message, limit=160) -> str:
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def describe(r: dict) -> str:
    return f"{r['contract']} {r['impl']} [{r['framework']}-{r['device']}] {r['check']}"


# --- the pytest plugin ----------------------------------------------------------------------

class Gate:
    """Per-process gate state (one per pytest config)."""

    def __init__(self, config):
        self.config = config
        self.html_path = config.getoption("conformance_html") or config.getini("conformance_html") or None
        self.expectations_path = (config.getoption("expectations") or config.getini("conformance_expectations")
                                  or None)
        self.strict = bool(config.getoption("strict_expectations") or config.getini("conformance_strict_expectations"))
        self.update = bool(config.getoption("update_expectations"))
        self.baseline_path = config.getoption("baseline")
        self.expectations: list[Expectation] = []
        self.baseline: dict | None = None
        self.failed_nodeids: set = set()   # every failed test report, conformance or not
        self.comparison: Comparison | None = None
        self.lines: list[tuple[str, dict]] = []   # terminal lines: (text, markup)
        self.stale: list[Expectation] = []        # entries matching nothing, or whose checks no longer fail
        if self.update and not self.expectations_path:
            raise pytest.UsageError("--update-expectations needs --expectations FILE (the file to rewrite)")
        if self.expectations_path and not (self.update and not Path(self.expectations_path).exists()):
            try:
                self.expectations = load_expectations(self.expectations_path)
            except ExpectationsError as exc:
                raise pytest.UsageError(str(exc)) from None
        if self.baseline_path and not _is_worker(config):
            try:
                self.baseline = load_results_file(self.baseline_path)
            except BaselineError as exc:
                raise pytest.UsageError(f"--baseline {exc}") from None

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed_nodeids.add(report.nodeid)


_GATE_KEY = pytest.StashKey[Gate]()


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _run(config):
    from .plugin import _RUN_KEY
    run = config.stash.get(_RUN_KEY, None)
    return run if run is not None and run.active else None


def pytest_addoption(parser):
    g = parser.getgroup("conformance", "layer conformance")
    g.addoption("--conformance-html", metavar="PATH", help="write a self-contained HTML report here")
    g.addoption("--expectations", metavar="FILE", help="YAML file of expected failures (each with a reason)")
    g.addoption("--strict-expectations", action="store_true", default=False,
                help="an expected failure that now passes fails the run")
    g.addoption("--update-expectations", action="store_true", default=False,
                help="rewrite the --expectations file from this run, keeping existing reasons")
    g.addoption("--baseline", metavar="OLD.json",
                help="a previous results file: fail only on regressions against it")
    parser.addini("conformance_html", "default --conformance-html", type="string", default=None)
    parser.addini("conformance_expectations", "default --expectations", type="string", default=None)
    parser.addini("conformance_strict_expectations", "default --strict-expectations", type="bool", default=False)


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
    what = annotate(record, gate.expectations)
    reason = "; ".join(filter(None, [record.get("expectation", {}).get("reason"),
                                     record.get("expectation", {}).get("link")]))
    if what == "expected" and report.failed:
        report.outcome = "skipped"   # pytest's own xfail: shown as 'x', counted as xfailed
        report.wasxfail = reason
    elif what == "unexpectedly_passed" and report.passed:
        if gate.strict:
            report.outcome = "failed"
            report.longrepr = f"[XPASS(strict)] {describe(record)}: expected to fail ({reason})"
        else:
            report.wasxfail = reason
    return report


def _scope(run, config):
    """Which baseline checks this run was asked to run: only those can have disappeared. The bundled
    matrix covers every framework unless --framework narrows it, so a framework that stopped importing
    shows up. --bindings covers every framework too (a framework whose last binding was removed shows up;
    --framework narrows it); --impl covers its one implementation. Under --changed-since the bindings
    the change did not touch are out of scope; a binding removed from the file is not one of them."""
    from .plugin import _opt
    impl = _opt(config, "impl", "conformance_impl") or None
    asked = set(_opt(config, "framework", "conformance_framework") or [])
    if impl:
        frameworks = {t.framework for t in run.targets}
    elif asked:
        frameworks = asked | {t.framework for t in run.targets}
    else:
        frameworks = None
    contracts = None
    if _opt(config, "contract", "conformance_contract") and not _opt(config, "bindings", "conformance_bindings"):
        contracts = {Path(t.contract_path).stem for t in run.targets}
        contracts |= {c.name for c in getattr(run, "contracts", {}).values()}
    untouched = (getattr(run.targets, "untouched", None) or []) if config.getoption("changed_since") else []

    def in_scope(r):
        return ((frameworks is None or r.get("framework") in frameworks) and r.get("device") in run.devices
                and r.get("check") in run.checks and (contracts is None or r.get("contract") in contracts)
                and (not impl or r.get("impl") == impl)
                and not any(r.get("impl") == i and r.get("contract") in names for i, names in untouched))
    return in_scope


def _selection_lines(selection: dict, say) -> None:
    """What --changed-since selected and why, or, when nothing, why no changed file maps to a binding."""
    rev, files = selection["changed_since"], selection["changed_files"]
    n = f"{len(files)} file{'' if len(files) == 1 else 's'} changed"
    if selection["selected"]:
        say((f"changed since {rev}: {n}; {len(selection['selected'])} binding(s) selected, "
             f"{selection['untouched']} untouched", {}))
        for s in selection["selected"]:
            say((f"  {s['contract']} {s['impl']}: {'; '.join(s['because'])}", {}))
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


def _environment(run):
    from . import results
    devices: dict = {}
    for r in run.results:
        devices.setdefault(r["framework"], set()).add(r["device"])
    return results.environment(run.frameworks(), {k: sorted(v) for k, v in devices.items()}, run.seed)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    # tryfirst: the records are annotated before the conformance plugin writes the results file
    config = session.config
    gate, run = config.stash.get(_GATE_KEY, None), _run(config)
    if gate is None or run is None or _is_worker(config):
        return
    say = gate.lines.append
    records = run.results
    selection = getattr(run.targets, "selection", None)
    if selection is not None:
        _selection_lines(selection, say)
    if gate.expectations:
        for r in records:
            if "expected" not in r and "unexpectedly_passed" not in r:
                annotate(r, gate.expectations)   # records that never went through makereport (lost checks)
        n_expected = sum(bool(r.get("expected")) for r in records)
        xpassed = [r for r in records if r.get("unexpectedly_passed")]
        say((f"expectations {gate.expectations_path}: {n_expected} expected failure(s) (xfail), "
             f"{len(xpassed)} expected failure(s) now passing", {}))
        for r in xpassed:
            say((f"  now passing: {describe(r)} (expected to fail: {r['expectation'].get('where')}"
                 f"{'; fails the run under --strict-expectations' if gate.strict else ''})", {"yellow": True}))
        nothing, not_failing = stale_expectations(gate.expectations, records)
        for e, what in [(e, "matches no check in this run") for e in nothing] + \
                       [(e, "no longer fails (its checks pass or are skipped)") for e in not_failing]:
            fields = ", ".join(f"{k}={v}" for k, v in e.patterns.items())
            say((f"  {'error' if gate.strict else 'warning'}: {e.where}: the entry for {fields} {what}",
                 {"red" if gate.strict else "yellow": True}))
        gate.stale = nothing + not_failing
    else:
        xpassed = []
    if gate.update:
        entries, counts = updated_expectations(gate.expectations, records)
        write_expectations(gate.expectations_path, entries)
        say((f"updated {gate.expectations_path}: {len(entries)} entries ({counts['kept']} kept, "
             f"{counts['dropped']} dropped as now passing, {counts['added']} added)", {}))
    if gate.baseline is not None:
        gate.comparison = compare(gate.baseline["results"], records, _scope(run, config))
        say((f"baseline {gate.baseline_path}: {gate.comparison.summary()}", {"bold": True}))
        for old, new in gate.comparison.newly_failing:
            tag = "expected" if new.get("expected") else "REGRESSION"
            was = f"{old['outcome']} -> {new['outcome']}" if old else f"{new['outcome']} (not in the baseline)"
            say((f"  {tag}: {describe(new)}: {was}: {_first_line(new.get('message'))}",
                 {"red": tag == "REGRESSION", "yellow": tag != "REGRESSION"}))
        for old, new in gate.comparison.newly_skipped:
            say((f"  REGRESSION: {describe(new)}: passed -> {new.get('outcome')}: {_first_line(new.get('message'))}",
                 {"red": True}))
        for old in gate.comparison.disappeared:
            say((f"  REGRESSION: {describe(old)}: {old.get('outcome')} in the baseline, not run now", {"red": True}))
        for old, new in gate.comparison.newly_passing:
            say((f"  fixed: {describe(new)}: {old['outcome']} -> passed", {"green": True}))
    if gate.html_path:
        def write_report(records=records):  # after the results file, which a failing report never costs
            from . import results
            from .report import write_html
            doc = results.document(records, _environment(run))
            write_html(gate.html_path, doc, baseline=gate.baseline, comparison=gate.comparison,
                       baseline_name=gate.baseline_path)
            say((f"conformance html: {os.path.abspath(gate.html_path)}", {}))
        run.reports.append(("--conformance-html", gate.html_path, write_report))

    # a --changed-since run that selected nothing collects nothing (pytest's 5); it is still gated:
    # against the baseline (a removed binding), and its summary says why nothing was selected
    nothing_selected = (selection is not None and not run.targets
                        and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED)
    if session.exitstatus in (EXIT_OK, EXIT_FAILED) or nothing_selected:
        session.exitstatus = _verdict(gate, records, xpassed, say)
        if nothing_selected and session.exitstatus == EXIT_OK:
            say(("gate: no layer to check: exit 0 (the lines above say why no changed file selects a binding)",
                 {"green": True}))


def _verdict(gate, records, xpassed, say) -> int:
    """0 or 1 from the records: pytest's own count cannot see expectations applied after the fact
    (a check whose worker crashed) nor a baseline."""
    other = gate.failed_nodeids - {r.get("nodeid") for r in records}   # the user's own tests, if any
    strict = (xpassed + gate.stale) if gate.strict else []
    if gate.strict and gate.stale:
        n = len(gate.stale)
        say((f"--strict-expectations: {n} stale expectations entr{'y' if n == 1 else 'ies'}: remove or "
             f"narrow {'it' if n == 1 else 'them'} (exit 1)", {"red": True}))
    if gate.baseline is not None:
        failing = gate.comparison.regressions
        if failing:
            say((f"gate: {len(failing)} regression(s) against the baseline (exit 1)", {"red": True}))
        elif any(r.get("outcome") in FAILING for r in records):
            say(("gate: no regressions against the baseline (what fails was failing before, or is expected)",
                 {"green": True}))
    else:
        failing = [r for r in records if r.get("outcome") in FAILING and not r.get("expected")]
    return EXIT_FAILED if (failing or other or strict) else EXIT_OK


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gate = config.stash.get(_GATE_KEY, None)
    if gate is None or not gate.lines:
        return
    terminalreporter.section("conformance gate")
    for text, markup in gate.lines:
        terminalreporter.write_line(text, **markup)
