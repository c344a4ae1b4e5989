"""The gate's verdict: one pure function from a run's records (with the expectations, the baseline and the
plan) to the exit code and the lines that say why. The pytest run (``layer_conformance.gate.hooks``) and
``python -m layer_conformance merge --gate`` (``layer_conformance.cli``) both ask it, so that shards merged
are judged as the one run they split. No pytest and no I/O here: the callers read the files and print.

Applying the expectations lives here too, as a function that returns new records: a check's record is final
once the check reports, and the excuse an entry gives it is new data (``excused``), not an edit.
"""
from __future__ import annotations

from dataclasses import dataclass

from .exitcodes import ExitCode
from .record import KEY, Record, as_records, derived
from .results import Comparison, compare


def blocker_of(record: Record, lookup):
    """The record of the check that ``record`` says blocked it (the same target; in the cases' own dtype where it
    was blocked there), from ``lookup(key)``; None where the run has none."""
    own = (record.details or {}).get("blocked_in_own_dtype")
    fields = {**{k: str(getattr(record, k)) for k in KEY}, "check": record.blocked_by, "dtype": "" if own else record.dtype}
    return lookup(tuple(fields[k] for k in KEY))


def settle(record: Record, lookup, *, complete: bool = True, elsewhere=None) -> Record:
    """``record`` as the run's own records bear it out. "Blocked" is the judge's conclusion from another record of
    this run, never the layer's process's word: it stands only where the check it names failed (or is itself
    blocked by a failure) on the same target; otherwise the check fails with its own symptom. ``complete``: the
    records are all there (the verdict); else a blocker not yet reported leaves the record as it is.
    ``elsewhere(record)``: its blocker runs in another process of the same matrix (a shard's deselected check),
    which ``merge --gate`` settles with both records."""
    if record.outcome != "blocked":
        return record
    seen, blocker = {record.key()}, blocker_of(record, lookup)
    while blocker is not None and blocker.outcome == "blocked" and blocker.key() not in seen:
        seen.add(blocker.key())
        blocker = blocker_of(blocker, lookup)
    if blocker is not None and blocker.failing:
        return record
    if blocker is None and (not complete or (elsewhere is not None and elsewhere(record))):
        return record
    by = record.blocked_by
    why = (f"{by} was not part of this run (a narrowed run: --check, --dtype or a shard): run it too, or this "
           f"check is not verified" if blocker is None else f"{by} {blocker.status()}")
    details = {k: v for k, v in (record.details or {}).items() if k not in ("symptom", "blocked_in_own_dtype")}
    symptom = (record.details or {}).get("symptom") or record.message
    return derived(record, outcome="failed", blocked_by="", details=details or None,
                   message=f"{symptom} (its own failure, not blocked: {why})")


def settled(records, elsewhere=None) -> list[Record]:
    """``settle`` of each record against all of them."""
    records = as_records(records)
    by_key = {r.key(): r for r in records}
    return [settle(r, by_key.get, elsewhere=elsewhere) for r in records]


def expectation_for(expectations, record: Record):
    """The entry that covers this record's outcome, else the first that matches it at all (None: no entry)."""
    matching = [e for e in expectations if e.matches(record)]
    covering = [e for e in matching if record.outcome in e.outcomes]
    return (covering or matching or [None])[0]


def excuse(record: Record, expectations) -> tuple | None:
    """What the entries say of this record's outcome, reading the record only: ("expected", entry) for a
    failure an entry covers, ("unexpectedly_passed", entry) for a pass an entry expected to fail, else None."""
    if record.outcome == "skipped":   # an entry for an n/a accepts it (``accepted_na``): it excuses no failure
        return None
    exp = expectation_for(expectations, record)
    if exp is None:
        return None
    if record.outcome in exp.outcomes:
        return "expected", exp
    if record.outcome == "passed":
        return "unexpectedly_passed", exp
    return None


def excused(record: Record, expectations) -> Record:
    """The record as the entries see it: a copy carrying the entry (``expected`` or ``unexpectedly_passed``,
    and ``expectation``: reason, link, where); the record itself where no entry speaks of it or where it
    already carries one (the run that wrote it applied its own file)."""
    if record.expectation is None and record.status() == "n/a" and accepted_na(record, expectations):
        # the entry accepting an n/a travels with the record (a shard's results, judged again at the merge)
        exp = next(e for e in expectations if e.matches(record) and "skipped" in e.outcomes)
        return derived(record, expectation=exp.as_record_note())
    said = None if record.expectation is not None else excuse(record, expectations)
    if said is None:
        return record
    what, exp = said
    return derived(record, **{what: True}, expectation=exp.as_record_note())


def apply_expectations(records, expectations) -> list[Record]:
    """``excused`` of each record (``Record`` or its JSON form), in order; the records given are unchanged."""
    return [excused(r, expectations) for r in as_records(records)]


def stale_expectations(expectations, records) -> tuple[list, list]:
    """(entries matching no check of these records, entries whose checks ran and none fails as expected)."""
    records = as_records(records)
    nothing, not_failing = [], []
    for e in expectations:
        mine = [r for r in records if e.matches(r)]
        if not mine:
            nothing.append(e)
        elif not any(r.outcome in e.outcomes for r in mine):
            not_failing.append(e)
    return nothing, not_failing


def layer_na(records) -> list[Record]:
    """The n/a records that rest on the layer's own process's word (``record.NA_SOURCES``), once each."""
    return [r for r in as_records(records) if r.status() == "n/a" and r.na_source == "layer"]


def accepted_na(record: Record, expectations) -> bool:
    """An expectations entry with ``expected: n/a`` accepts this n/a."""
    return record.expectation is not None or any(e.matches(record) and "skipped" in e.outcomes for e in expectations)


@dataclass(frozen=True)
class Verdict:
    exit_code: ExitCode
    headline: str                  # the gate's last line, e.g. "gate: 1 failing check(s) (exit 1)"
    records: tuple                 # the records with the expectations applied (new copies where an entry spoke)
    failing: tuple                 # what fails it: failures no entry covers, or regressions against the baseline
    excused: tuple                 # failing checks an expectations entry covers
    xpassed: tuple                 # checks an entry expected to fail that passed
    stale: tuple                   # entries matching no check, or whose checks no longer fail
    missing: tuple                 # node ids of planned checks without a record
    recorded: tuple                # failures excused by the entries --update-expectations wrote in this run
    other: tuple                   # node ids of failed tests that are no conformance check
    comparison: Comparison | None  # against the baseline, where one was given
    strict: bool = False           # --strict-expectations: xpassed and stale fail it
    layer_na: tuple = ()           # n/a on the layer's own word, each with whether an entry accepts it
    strict_na: bool = False        # --strict-na: such an n/a that no entry accepts fails it

    @property
    def passed(self) -> bool:
        return self.exit_code == ExitCode.OK

    def lines(self) -> list[tuple[str, dict]]:
        """What to print last, as (text, terminal markup): the strict entries' count, then the headline."""
        out = []
        if self.layer_na:
            open_ = [r for r, ok in self.layer_na if not ok]
            out.append((f"n/a on the layer's own word: {len(self.layer_na)} ({len(self.layer_na) - len(open_)} "
                        f"accepted by an expectations entry; the others "
                        f"{'fail the run (--strict-na)' if self.strict_na else 'pass, as --strict-na would not'})",
                        {"yellow": True}))
            for r, ok in self.layer_na:
                out.append((f"  {'accepted' if ok else 'n/a'}: {r.describe()}: {r.message}",
                            {} if ok else {"red": True} if self.strict_na else {"yellow": True}))
        if self.strict and self.stale:
            n = len(self.stale)
            out.append((f"--strict-expectations: {n} stale expectations entr{'y' if n == 1 else 'ies'}: remove or "
                        f"narrow {'it' if n == 1 else 'them'} (exit 1)", {"red": True}))
        out.append((self.headline, {"green": True} if self.passed else {"red": True}))
        return out


def verdict(records, planned=None, expectations=(), baseline=None, *, strict=False, in_scope=None,
            interrupted=None, other_failures=(), recorded=(), left_out=None, strict_na=False,
            elsewhere=None) -> Verdict:
    """The verdict on ``records`` (``Record`` or their JSON form).

    planned: the node ids the run planned (None: not known here; ``merge`` has checked each file's plan); one
      without a record fails the run, which did not complete its plan.
    expectations: the entries of the expectations file, applied to every record that carries none yet.
    baseline: the baseline's records: then only regressions fail it (``Comparison.regressions``), and
      ``in_scope(old_record)`` says which baseline checks this run was asked to run.
    strict: an expected failure that passes, and a stale entry, fail it.
    strict_na: an n/a on the layer's own word (``layer_na``) that no ``expected: n/a`` entry accepts fails it.
    elsewhere: ``settle``'s: a blocked record whose blocker another shard runs stays blocked for the merge.
    interrupted: why the run stopped early (truthy): no verdict on what it did, exit 2.
    other_failures: node ids of failed tests that are not conformance checks (the user's own tests).
    recorded: entries --update-expectations wrote in this run: they excuse what is still unexcused, and are
      not judged stale. left_out(entry): an entry about what the run left out on purpose, not stale.
    """
    first = apply_expectations(settled(records, elsewhere), expectations)
    # an entry written for a failure excuses that failure only (an entry without dtype matches every dtype)
    records = [excused(r, recorded) if r.failing else r for r in first]
    recorded_ = tuple(r for r, was in zip(records, first) if r is not was)
    nothing, not_failing = stale_expectations(expectations, records)
    if left_out is not None:
        nothing = [e for e in nothing if not left_out(e)]
    stale = tuple(nothing + not_failing)
    xpassed = tuple(r for r in records if r.unexpectedly_passed)
    excused_ = tuple(r for r in records if r.failing and r.expected)
    comparison = compare(baseline, records, in_scope) if baseline is not None else None
    failing = tuple(comparison.regressions if comparison is not None
                    else [r for r in records if r.failing and not r.expected])
    done = {r.nodeid for r in records}
    missing = tuple(n for n in (planned or ()) if n not in done)
    other = tuple(sorted(set(other_failures) - done))
    claimed = tuple((r, accepted_na(r, expectations)) for r in layer_na(records))
    parts = []
    if failing:
        parts.append(f"{len(failing)} regression(s) against the baseline" if comparison is not None
                     else f"{len(failing)} failing check(s)")
    if strict and xpassed:
        parts.append(f"{len(xpassed)} expected failure(s) now passing")
    if strict and stale:
        parts.append(f"{len(stale)} stale expectations entr{'y' if len(stale) == 1 else 'ies'}")
    unaccepted = sum(1 for _, ok in claimed if not ok)
    if strict_na and unaccepted:
        parts.append(f"{unaccepted} n/a on the layer's own word (--strict-na)")
    if other:
        parts.append(f"{len(other)} other failing test(s)")
    if missing:
        parts.append(f"{len(missing)} planned check(s) without a result")
    if interrupted:
        why = f" ({interrupted})" if isinstance(interrupted, str) else ""
        code, headline = ExitCode.INTERRUPTED, f"gate: interrupted{why}: no verdict (exit 2)"
    elif parts:
        code, headline = ExitCode.FAILED, f"gate: {', '.join(parts)} (exit 1)"
    else:
        code = ExitCode.OK
        headline = "gate: passed" + (" (no regressions against the baseline)" if comparison is not None else "")
    return Verdict(exit_code=code, headline=headline, records=tuple(records), failing=failing, excused=excused_,
                   xpassed=xpassed, stale=stale, missing=missing, recorded=recorded_, other=other,
                   comparison=comparison, strict=strict, layer_na=claimed, strict_na=strict_na)
