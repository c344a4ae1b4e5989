"""The results file (the source of truth; terminal, JUnit and HTML views derive from it)."""
from __future__ import annotations

import json
import platform
import sys
from datetime import datetime, timezone

from . import __version__

SCHEMA_VERSION = 1
# blocked: not judged, because of a mistake another check names (the record's `blocked_by`)
OUTCOMES = ("passed", "failed", "blocked", "skipped", "error")


def environment(frameworks: dict, devices: dict, seed: int, argv=None) -> dict:
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
    }


def document(results: list[dict], env: dict, extra: dict | None = None) -> dict:
    key = lambda r: (r["contract"], r["impl"], r["framework"], r["device"], r["check"])
    doc = {
        "schema_version": SCHEMA_VERSION,
        "harness_version": __version__,
        "environment": env,
        **(extra or {}),   # whether the run covered its plan; `selection` of a --changed-since run
        "results": sorted(results, key=key),
    }
    return doc


def write(path, results: list[dict], env: dict, extra: dict | None = None) -> None:
    write_atomically(path, json.dumps(document(results, env, extra), indent=2, sort_keys=False) + "\n")


def write_atomically(path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename: a reader (or a second run writing the
    same path) sees the old file or the new one, never half of one."""
    import os
    import tempfile
    from pathlib import Path
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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

    def record(self, rec: dict):
        self._line({"record": rec})

    def close(self, remove: bool):
        self.file.close()
        if remove:
            self.path.unlink(missing_ok=True)

    @staticmethod
    def read(path) -> tuple[list[str], list[dict]]:
        plan, records = [], []
        for line in open(path):
            try:
                obj = json.loads(line)
            except ValueError:  # the last line of a journal whose writer was killed mid-line
                continue
            plan = obj.get("plan", plan)
            if "record" in obj:
                records.append(obj["record"])
        return plan, records


def merge(docs: list[dict]) -> dict:
    """Combine results files (e.g. the main and the MXNet environments); a conflicting duplicate is an error."""
    seen: dict = {}
    env: dict = {"frameworks": {}, "devices": {}, "merged_from": []}
    for doc in docs:
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unsupported results schema_version {doc.get('schema_version')!r}")
        e = doc.get("environment", {})
        env["frameworks"].update(e.get("frameworks", {}))
        env["devices"].update(e.get("devices", {}))
        env["merged_from"].append({k: e.get(k) for k in ("python", "numpy", "command", "date", "seed")})
        for r in doc["results"]:
            k = (r["contract"], r["impl"], r["framework"], r["device"], r["check"])
            if k in seen and (seen[k]["outcome"], seen[k]["message"]) != (r["outcome"], r["message"]):
                raise ValueError(f"conflicting results for {'/'.join(k)}: {seen[k]['outcome']} vs {r['outcome']}")
            seen[k] = r
    for k in ("python", "numpy", "seed", "date", "command", "platform"):
        env[k] = docs[0].get("environment", {}).get(k) if docs else None
    return document(list(seen.values()), env)


SYMBOL = {"passed": "ok", "failed": "FAIL", "skipped": "skip", "blocked": "blkd", "error": "ERR", "n/a": "n/a", "xfail": "xfail",
          "xpass": "XPASS"}


def summary_table(results: list[dict]) -> str:
    """One row per (contract, impl, framework, device), one column per check."""
    from .checks import CHECKS
    checks = list(CHECKS) + sorted({r["check"] for r in results} - set(CHECKS))
    checks = [c for c in checks if any(r["check"] == c for r in results)]
    rows: dict = {}
    for r in results:
        cell = "n/a" if r["outcome"] == "skipped" and r.get("not_applicable") else r["outcome"]
        cell = "xfail" if r.get("expected") else "xpass" if r.get("unexpectedly_passed") else cell  # harness.gate
        rows.setdefault((r["contract"], r["impl"], r["framework"], r["device"]), {})[r["check"]] = cell
    head = ["contract", "impl", "framework", "device"]
    table = [head + checks]
    for key in sorted(rows):
        table.append(list(key) + [SYMBOL.get(rows[key].get(c, ""), "") for c in checks])
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts = {o: sum(r["outcome"] == o for r in results) for o in OUTCOMES}
    lines.append(", ".join(f"{n} {o}" for o, n in counts.items()))
    return "\n".join(lines)
