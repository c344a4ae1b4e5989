"""The results file (the source of truth; terminal, JUnit and HTML views derive from it).

This module owns the file: write (atomically), load (validated; errors name the file), merge,
compare and the summary table. Records are ``layer_conformance.record.Record``; the file holds their JSON form.
"""
from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone

from . import __version__
from .record import FAILING, KEY, OUTCOMES, Record, as_records

# 2: records may carry `duration`. A file of version 1 reads as it always did (it has no durations).
# 3: the document holds `results_sha256`, the hash of its records and its plan counts (``records_hash``), and,
#    written by a run, `not_collected`; ``merge`` checks them. A file of version 1 or 2 has no hash: it
#    still loads, and merges with a note (``check_document``).
SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
HASH_FIELD = "results_sha256"
# what a run's document says about its plan (layer_conformance.plugin): the hash covers them with the records.
# planned: the checks it collected (one record each, `not_run` ones included); not_collected: its records that
# are no planned check (a check the contract can never run has no item, only an n/a record: checks.applicable)
PLAN_FIELDS = ("complete", "planned", "not_run", "not_collected")


class ResultsFileError(ValueError):
    """A results file that cannot be read, is no results file, or cannot be merged; names the file."""


def environment(frameworks: dict, devices: dict, seed: int, argv=None, sandbox: str | None = None) -> dict:
    import numpy
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "frameworks": frameworks,
        "devices": devices,
        "seed": seed,
        "command": " ".join(argv if argv is not None else sys.argv),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "sandbox": sandbox,  # the executors': namespaces+cgroup, namespaces, or none: <why> (--sandbox)
    }


def devices_of(records) -> dict:
    """framework -> the devices its records ran on (the environment's `devices`)."""
    out: dict = {}
    for r in as_records(records):
        out.setdefault(r.framework, set()).add(r.device)
    return {k: sorted(v) for k, v in out.items()}


def document(records, env: dict, extra: dict | None = None, plan=None) -> dict:
    """The results file's JSON: records (``Record`` or their JSON form) sorted by identity, and their hash.
    ``plan``: the node ids the run planned (its `planned` count is in ``extra``); the records outside it
    are counted as `not_collected`."""
    extra = dict(extra or {})
    if plan is not None:
        planned = set(plan)
        extra["not_collected"] = sum(r.nodeid not in planned for r in as_records(records))
    return with_hash({
        "schema_version": SCHEMA_VERSION,
        "harness_version": __version__,
        "environment": env,
        **extra,   # whether the run covered its plan; `selection` of a --changed-since run; `loaded_files`
        "results": [r.to_json() for r in sorted(as_records(records), key=Record.key)],
    })


def records_hash(doc: dict) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of a document's records, in its order, and of
    its plan counts (PLAN_FIELDS): a record removed, added or edited, or `complete` set, changes it."""
    import hashlib
    body = {"results": [r.to_json() for r in as_records(doc.get("results", []))],
            **{k: doc[k] for k in PLAN_FIELDS if k in doc}}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def with_hash(doc: dict) -> dict:
    """The document with its `results_sha256` (placed before its records)."""
    out = {k: v for k, v in doc.items() if k not in (HASH_FIELD, "results")}
    return dict(out, **{HASH_FIELD: records_hash(doc), "results": doc.get("results", [])})


def write(path, records, env: dict, extra: dict | None = None, plan=None) -> None:
    write_document(path, document(records, env, extra, plan))


def write_document(path, doc: dict) -> None:
    """A document as ``load`` or ``merge`` returns it (records as ``Record``) or as ``document`` makes it."""
    doc = dict(doc, results=[r.to_json() for r in as_records(doc.get("results", []))])
    if HASH_FIELD in doc:   # what is written is what its hash says
        doc = with_hash(doc)
    write_atomically(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")


def write_atomically(path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename: a reader (or a second run writing the
    same path) sees the old file or the new one, never half of one. The file gets the mode a plain
    ``open(path, "w")`` gives, 0o666 less the umask (the temporary file is made 0o600, which the rename would
    otherwise keep, and CI artifact uploaders and web servers could not read)."""
    import os
    import tempfile
    from pathlib import Path
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    umask = _umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~umask)
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    """The process's umask: read from /proc where it can be (setting it to read it is not thread-safe)."""
    import os
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def from_json(doc, where: str = "results") -> dict:
    """A parsed results document with its records as ``Record``; ResultsFileError names ``where``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ResultsFileError(f"{where}: not a results file (no `results` list)")
    version = doc.get("schema_version")
    if version not in READABLE_VERSIONS:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise ResultsFileError(
            f"{where}: unsupported results schema_version {version!r} (this harness reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}" + ("; the file was written by a newer harness: "
                                                           "upgrade this one to read it)" if newer else ")"))
    records = []
    for i, r in enumerate(doc["results"]):
        try:
            records.append(Record.from_json(r))
        except ValueError as exc:
            raise ResultsFileError(f"{where}: results[{i}]: {exc}") from None
    return dict(doc, results=records)


def load(path) -> dict:
    """Read and validate a results file: its document, with ``results`` as a list of ``Record``."""
    from pathlib import Path
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ResultsFileError(f"{path}: not a results file (invalid JSON: {exc})") from None
    return from_json(doc, str(path))


class Journal:
    """The run as it happens, in JSON lines beside the results file: first the plan (every check id
    the run will execute), then each record as soon as it exists, flushed. A run that is killed
    outright leaves its journal; a run that ends writes the results file from what it holds."""

    def __init__(self, results_path):
        from pathlib import Path
        self.path = Path(str(results_path) + ".journal")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "w")

    def _line(self, obj):
        import os
        self.file.write(json.dumps(obj, default=str) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def plan(self, nodeids: list[str]):
        self._line({"plan": sorted(nodeids)})

    def record(self, rec: Record):
        self._line({"record": rec.to_json()})

    def close(self, remove: bool):
        self.file.close()
        if remove:
            self.path.unlink(missing_ok=True)

    @staticmethod
    def read(path) -> tuple[list[str], list[Record]]:
        plan, records = [], []
        for line in open(path):
            try:
                obj = json.loads(line)
            except ValueError:  # the last line of a journal whose writer was killed mid-line
                continue
            plan = obj.get("plan", plan)
            if "record" in obj:
                records.append(Record.from_json(obj["record"]))
        return plan, records


def check_document(doc: dict, name: str) -> list[str]:
    """Why a document (its records as ``Record``) cannot be merged: an empty list where it can.

    It covers its plan: `complete` is true, and it holds one record per planned check plus the ones it
    says are no planned check (`planned` + `not_collected`). Its records and plan counts are the ones it
    was written with: they hash to its `results_sha256`. A document of version 1 or 2 has no hash (nor,
    before version 3, `not_collected`): ``merge`` accepts it with a note; one of version 3 without one
    has lost it."""
    problems = []
    stored = doc.get(HASH_FIELD)
    version = doc.get("schema_version")
    if stored is None:
        if isinstance(version, int) and version >= 3:
            problems.append(f"it has no {HASH_FIELD} (a results file of schema_version {version} is written "
                            f"with one): it was edited after its run")
    elif stored != records_hash(doc):
        problems.append(f"its records or plan counts do not hash to its {HASH_FIELD}: the file was edited "
                        f"after its run (a record removed, added or changed)")
    if "complete" in doc and doc["complete"] is not True:
        why = f": {doc['interrupted']}" if doc.get("interrupted") else ""
        problems.append(f"its run did not complete its plan (complete: {json.dumps(doc['complete'])}; "
                        f"{doc.get('not_run', '?')} of {doc.get('planned', '?')} planned checks not run{why}): "
                        f"rerun it")
    counts = {k: doc.get(k) for k in ("planned", "not_collected")}
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0) for v in counts.values()):
        problems.append(f"its plan counts are not counts ({', '.join(f'{k}: {v!r}' for k, v in counts.items())})")
    elif None not in counts.values():
        expected, n = counts["planned"] + counts["not_collected"], len(doc["results"])
        if n != expected:
            problems.append(f"it holds {n} records where its plan accounts for {expected} ({counts['planned']} "
                            f"planned checks + {counts['not_collected']} n/a records of checks never collected): "
                            f"records were {'removed' if n < expected else 'added'} after its run")
    return problems


def merge(docs: list[dict], names=None, notes: list | None = None) -> dict:
    """Combine results documents (e.g. the main and the MXNet environments, CI shards); a conflicting
    duplicate is a ResultsFileError. ``names`` (the files) go into its message.

    Each document must cover its plan and be as its run wrote it (``check_document``), and no two may
    be the same results (the same shard given twice): a ResultsFileError names the file(s) and why.
    A document without a hash (written before schema_version 3) is merged, with a line in ``notes``.
    The merged document keeps the plan counts (summed; complete when every document is) and its own hash."""
    where = ", ".join(map(str, names)) if names else "results"
    names = [str(n) for n in names] if names else [f"results document {i + 1}" for i in range(len(docs))]
    docs = [d if all(isinstance(r, Record) for r in d.get("results", [])) else from_json(d, n)
            for d, n in zip(docs, names)]
    problems = [f"{n}: {p}" for d, n in zip(docs, names) for p in check_document(d, n)]
    if problems:
        raise ResultsFileError(f"cannot merge {where}: " + "; ".join(problems))
    by_hash: dict = {}
    for d, n in zip(docs, names):
        by_hash.setdefault(d.get(HASH_FIELD) or records_hash(d), []).append(n)
    twice = [ns for ns in by_hash.values() if len(ns) > 1]
    if twice:
        raise ResultsFileError(f"cannot merge {where}: " + "; ".join(
            (f"{ns[0]} is given {len(ns)} times" if len(set(ns)) == 1 else f"{' and '.join(ns)} are the same results")
            + f" (the same {HASH_FIELD}): one shard given twice" for ns in twice))
    if notes is not None:
        notes += [f"{n}: no {HASH_FIELD} (written by a harness before results schema_version 3): not checked "
                  f"against its plan or for edits; rerun it with this harness to have it checked"
                  for d, n in zip(docs, names) if HASH_FIELD not in d]
    seen: dict = {}
    env: dict = {"frameworks": {}, "devices": {}, "merged_from": []}
    for doc in docs:
        e = doc.get("environment", {})
        env["frameworks"].update(e.get("frameworks", {}))
        env["devices"].update(e.get("devices", {}))
        env["merged_from"].append({k: e.get(k) for k in ("python", "numpy", "command", "date", "seed")})
        for r in doc["results"]:
            k = r.key()
            if k in seen and (seen[k].outcome, seen[k].message) != (r.outcome, r.message):
                raise ResultsFileError(f"cannot merge {where}: conflicting results for {'/'.join(k)}: "
                                       f"{seen[k].outcome} vs {r.outcome}")
            seen[k] = r
    for k in ("python", "numpy", "seed", "date", "command", "platform"):
        env[k] = docs[0].get("environment", {}).get(k) if docs else None
    plan = {}
    if docs and all(d.get(k) is not None for d in docs for k in ("planned", "not_collected")):
        planned = sum(d["planned"] for d in docs)
        # each document's n/a records may be in the others too (every shard has them); its planned checks not
        if len(seen) < planned + max(d["not_collected"] for d in docs):
            raise ResultsFileError(f"cannot merge {where}: they hold {len(seen)} distinct records, fewer than "
                                   f"their {planned} planned checks and n/a records: the same checks were run "
                                   f"in more than one of them (a shard given twice, run again?)")
        plan = {"complete": all(d.get("complete") is True for d in docs), "planned": planned,
                "not_run": sum(d.get("not_run") or 0 for d in docs), "not_collected": len(seen) - planned}
    elif notes is not None and docs and any("planned" in d for d in docs):
        notes.append(f"{where}: not every file states its plan: the merged results state none")
    loaded = merged_loaded_files(docs)
    merged = document(list(seen.values()), env, dict(plan, **({"loaded_files": loaded} if loaded else {})))
    return dict(merged, results=as_records(merged["results"]))


def merged_loaded_files(docs: list[dict]) -> list[dict]:
    """The documents' `loaded_files` (per binding, the files its processes saw it load: what --changed-since
    selects by against a baseline), one entry per binding with the union of its files. Not in the hash: the
    baseline a gate reads it from is trusted as a whole."""
    out: dict = {}
    for doc in docs:
        for e in doc.get("loaded_files") or []:
            if not isinstance(e, dict) or not isinstance(e.get("files"), list):
                continue
            key = (e.get("contract"), e.get("impl"), e.get("framework"))
            entry = out.setdefault(key, {"contract": key[0], "impl": key[1], "framework": key[2], "files": set()})
            entry["files"].update(f for f in e["files"] if isinstance(f, str))
            if e.get("truncated"):
                entry["truncated"] = True
    return [dict(e, files=sorted(e["files"])) for _, e in sorted(out.items(), key=lambda kv: tuple(map(str, kv[0])))]


# --- comparison against a baseline (the gate, the report's diff and `python -m layer_conformance merge`) ----

@dataclass
class Comparison:
    """The difference between a baseline's records and this run's, by record key.

    A baseline tolerates the failures it already has: a check that fails now counts as newly failing
    unless it failed (or errored) in the baseline too -- whether it passed there, was skipped, or is new.
    A check that passed in the baseline and is skipped now (n/a included) is newly skipped: a check that
    no longer checks anything. A skip on both sides (an n/a with its reason, a missing GPU) is no change.
    One mistake counts once: a check newly blocked by a newly failing one is listed under it
    (``newly_blocked``), not as a regression of its own.
    """
    newly_failing: list = field(default_factory=list)      # (old or None, new): failing now, not before
    newly_passing: list = field(default_factory=list)      # (old, new): failed/error -> passed
    unchanged_failing: list = field(default_factory=list)  # (old, new): failing in both
    newly_skipped: list = field(default_factory=list)      # (old, new): passed -> skipped or blocked
    newly_blocked: list = field(default_factory=list)      # (old, new): passed -> blocked by a newly failing check
    disappeared: list = field(default_factory=list)        # old: in the baseline (any outcome), not in this run

    @property
    def regressions(self) -> list[Record]:
        """What fails the gate: newly failing checks without an expectations entry, newly skipped ones,
        and vanished ones."""
        return ([new for _, new in self.newly_failing if not new.expected]
                + [new for _, new in self.newly_skipped] + list(self.disappeared))

    def summary(self) -> str:
        text = (f"{len(self.newly_failing)} newly failing, {len(self.newly_passing)} newly passing, "
                f"{len(self.unchanged_failing)} unchanged failing")
        if self.newly_skipped:
            text += f", {len(self.newly_skipped)} newly skipped"
        if self.newly_blocked:
            text += f", {len(self.newly_blocked)} newly blocked by them"
        extra = []
        unknown = sum(old is None for old, _ in self.newly_failing)
        if unknown:
            extra.append(f"{unknown} of the newly failing not in the baseline")
        expected = sum(bool(new.expected) for _, new in self.newly_failing)
        if expected:
            extra.append(f"{expected} of the newly failing expected")
        if self.disappeared:
            extra.append(f"{len(self.disappeared)} baseline check(s) no longer run")
        return text + (f" ({'; '.join(extra)})" if extra else "")

    def blocked_under(self, root: Record) -> list:
        """(old, new) of every check newly blocked by the newly failing ``root``."""
        return [(o, n) for o, n in self.newly_blocked if blocker_key(n) == root.key()]

    def changes(self) -> dict[tuple, tuple[str, str | None]]:
        """key -> (label, baseline outcome or None) for every record of this run that changed or still fails."""
        out = {}
        for label in ("newly_failing", "newly_skipped", "newly_passing", "unchanged_failing"):
            for old, new in getattr(self, label):
                out[new.key()] = (label, old.outcome if old else None)
        return out


def blocker_key(r: Record) -> tuple | None:
    """The key of the record that blocks ``r`` (None where it is not blocked): the same target's check
    ``blocked_by``, in the cases' own dtype where the runner says the blocker failed there."""
    if r.outcome != "blocked" or not r.blocked_by:
        return None
    own = bool((r.details or {}).get("blocked_in_own_dtype"))
    return tuple("" if k == "dtype" and own else r.blocked_by if k == "check" else v for k, v in zip(KEY, r.key()))


def compare(baseline, current, in_scope=None) -> Comparison:
    """Compare records (``Record`` or their JSON form); ``in_scope(old_record)`` limits which baseline
    checks count as disappeared."""
    old = {r.key(): r for r in as_records(baseline)}
    new = {r.key(): r for r in as_records(current)}
    c = Comparison()
    for k in sorted(new):
        n, o = new[k], old.get(k)
        was, now = o.outcome if o else None, n.outcome
        if now in FAILING:
            (c.unchanged_failing if was in FAILING else c.newly_failing).append((o, n))
        elif now == "passed" and was in FAILING:
            c.newly_passing.append((o, n))
        elif now in ("skipped", "blocked") and was == "passed":
            c.newly_skipped.append((o, n))   # blocked: not judged any more, whatever blocks it
    new_failures = {n.key() for _, n in c.newly_failing}
    c.newly_blocked = [(o, n) for o, n in c.newly_skipped if blocker_key(n) in new_failures]
    c.newly_skipped = [(o, n) for o, n in c.newly_skipped if blocker_key(n) not in new_failures]
    # whatever the outcome was: a check that no longer runs can no longer be gated
    for k in sorted(set(old) - set(new)):
        if in_scope is None or in_scope(old[k]):
            c.disappeared.append(old[k])
    return c


TARGET = tuple(k for k in KEY if k != "check")   # a row of the summary table: everything but the check
SYMBOL = {"passed": "ok", "failed": "FAIL", "skipped": "skip", "blocked": "blkd", "error": "ERR", "n/a": "n/a",
          "xfail": "xfail", "xpass": "XPASS"}


def summary_table(records, collected=None) -> str:
    """One row per (contract, impl, framework, device), one column per check, then the counts (``collected``: the
    test ids the run collected, which tells its n/a records of checks never collected from its skipped checks)."""
    from .checks import CHECKS
    records = as_records(records)
    checks = list(CHECKS) + sorted({r.check for r in records} - set(CHECKS))
    checks = [c for c in checks if any(r.check == c for r in records)]
    rows: dict = {}
    for r in records:
        rows.setdefault(tuple(getattr(r, k) for k in TARGET), {})[r.check] = r.status()
    head = list(TARGET)
    table = [head + checks]
    for key in sorted(rows):
        table.append(list(key) + [SYMBOL.get(rows[key].get(c, ""), "") for c in checks])
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    # n/a apart from skipped, so that "skipped" means what pytest's own line means by it (with "blocked": pytest
    # counts both as skipped): the collected checks that were skipped. n/a: the checks never collected, whose records
    # say why (``collected``, the test ids the run collected; without it, from a file, every n/a record)
    counts = {o: sum(r.outcome == o for r in records) for o in OUTCOMES}
    counts["n/a"] = sum(r.status() == "n/a" and (collected is None or r.nodeid not in collected) for r in records)
    counts["skipped"] -= counts["n/a"]
    order = ("passed", "failed", "blocked", "n/a", "skipped", "error")
    lines.append(", ".join(f"{counts[o]} {o}" for o in order))
    return "\n".join(lines)
