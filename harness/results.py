"""The results file (the source of truth; terminal, JUnit and HTML views derive from it)."""
from __future__ import annotations

import json
import platform
import sys
from datetime import datetime, timezone

from . import __version__

SCHEMA_VERSION = 1
OUTCOMES = ("passed", "failed", "skipped", "error")


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
    return {
        "schema_version": SCHEMA_VERSION,
        "harness_version": __version__,
        "environment": env,
        **(extra or {}),   # e.g. `selection` of a --changed-since run
        "results": sorted(results, key=key),
    }


def write(path, results: list[dict], env: dict, extra: dict | None = None) -> None:
    from pathlib import Path
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(document(results, env, extra), indent=2, sort_keys=False) + "\n")


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


SYMBOL = {"passed": "ok", "failed": "FAIL", "skipped": "skip", "error": "ERR", "n/a": "n/a", "xfail": "xfail",
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
