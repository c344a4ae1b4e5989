"""Render a results document as one self-contained HTML file.

The records go into the page once, as JSON in a ``<script type="application/json">`` block
(every ``<``, ``>`` and ``&`` written as a ``\\u`` escape, so no text from a contract or a layer
can end the block); a small vanilla script builds the matrix and the details from it on demand
with ``textContent`` only. No network, fonts or external files: the page opens from disk.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ..record import KEY, STATUSES as STATUS_ORDER, Record, as_records
from ..reproduce import repro_command   # the reproduction command's owner (the terminal says it too)

# a cell's verdict: a symbol and a word, so it reads without colour
LOOK = {"passed": ["\u2713", "pass"], "failed": ["\u2717", "FAIL"], "error": ["!", "ERROR"],
        "xfail": ["\u2717", "xfail"], "xpass": ["\u2713", "xpass"], "skipped": ["\u2013", "skip"],
        "blocked": ["\u2298", "blocked"],
        "n/a": ["\u00b7", "n/a"]}
# its counts: "7 failed · 1 passed · 6 skipped", every status by name (a bare "1/8" read as one failure)
COUNT_WORDS = {"error": ["error", "errors"], "failed": ["failed", "failed"], "xpass": ["xpass", "xpass"],
               "xfail": ["xfail", "xfail"], "passed": ["passed", "passed"], "skipped": ["skipped", "skipped"],
               "blocked": ["blocked", "blocked"],
               "n/a": ["n/a", "n/a"]}
_BUNDLED_IMPL = re.compile(r"^layer_conformance\.reference_impls\.\w+\.\w+:IMPL$")
_TOLERANCE_IN_MESSAGE = re.compile(r"allowed rtol=([^,;\s]+), atol=([^,;\s)]+)")


def cell_lines(checks: list[dict]) -> list[str]:
    """The text of one matrix cell, line by line, from its checks (entries of ``build_data``'s ``checks``).

    The page's script draws the same lines (it re-counts when filters hide checks); the browser test
    holds the two to each other.
    """
    statuses = [c["status"] for c in checks]
    if checks and all(c.get("unavailable") for c in checks):
        return ["\u2205 unavailable", "no such device here"]   # a device not present here, not a failure
    worst = next((s for s in STATUS_ORDER if s in statuses), "n/a")
    counts = []
    for s in STATUS_ORDER:
        n = statuses.count(s)
        if n:
            counts.append(f"{n} {COUNT_WORDS[s][0 if n == 1 else 1]}")
    lines = [" ".join(LOOK[worst]), " \u00b7 ".join(counts)]
    if any(c.get("change") in ("newly_failing", "newly_skipped") for c in checks):
        lines.append("\u25b2 regression")
    return lines


def row_label(r: Record) -> str:
    """Bundled reference implementations share one row per contract across frameworks."""
    impl = str(r.impl)
    # a bundled target that is not applicable in a framework has no implementation at all
    return "reference" if _BUNDLED_IMPL.match(impl) or impl == "(not applicable)" else impl


def _finite(obj):
    """JSON.parse has no NaN or Infinity: write them as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _numbers(r: Record) -> dict:
    """Largest error and tolerance, from details or (for the tolerance) the assert_close-style message."""
    details = r.details or {}
    out = {k: details[k] for k in ("max_abs_error", "rtol", "atol", "tolerance") if k in details}
    if "rtol" not in out and "tolerance" not in out:
        m = _TOLERANCE_IN_MESSAGE.search(r.message or "")
        if m:
            out["rtol"], out["atol"] = m.group(1), m.group(2)
    return out


def build_data(doc: dict, comparison=None, baseline_name: str | None = None, title: str | None = None) -> dict:
    """What the page's script renders: one entry per check, plus provenance and the baseline diff."""
    from ..checks import CHECKS
    from ..contract import bundled_contracts
    bundled = set(bundled_contracts())
    env = doc.get("environment") or {}
    changes = comparison.changes() if comparison is not None else {}
    # a check newly blocked by a newly failing one is listed under it, as the gate lists it
    roots = {}
    for _, root in comparison.newly_failing if comparison is not None else ():
        for old, blocked in comparison.blocked_under(root):
            changes[blocked.key()] = ("newly_blocked", old.outcome if old else None)
            roots[blocked.key()] = root.key()
    records = as_records(doc.get("results", []))
    index = {r.key(): i for i, r in enumerate(records)}
    checks = []
    for r in records:
        change, was = changes.get(r.key(), (None, None))
        checks.append({
            **{k: getattr(r, k) for k in KEY}, "row": row_label(r),
            "outcome": r.outcome, "status": r.status(), "message": r.message or "",
            "details": r.details or {}, "numbers": _numbers(r), "duration": r.duration,
            "nodeid": r.nodeid, "expectation": r.expectation, "change": change,
            "was": was, "repro": repro_command(r, env.get("seed"), bundled),
            "unavailable": r.unavailable, "blocked_by": r.blocked_by, "under": index.get(roots.get(r.key())),
        })
    baseline = None
    if comparison is not None:
        def rows(pairs):
            return [index[new.key()] for _, new in pairs]
        baseline = {
            "name": baseline_name or "baseline", "summary": comparison.summary(),
            "regressions": len(comparison.regressions),
            # the table's rows as the gate says them: each new failure with the checks it newly blocks
            # under it, then the newly skipped (the disappeared follow), the newly passing last
            "changed": [i for _, root in comparison.newly_failing
                        for i in [index[root.key()]] + rows(comparison.blocked_under(root))]
                       + rows(comparison.newly_skipped),
            # the checks each new failure newly blocks, by its index: the page folds them into one row under it
            "blocked_under": {str(index[root.key()]): rows(comparison.blocked_under(root))
                              for _, root in comparison.newly_failing if comparison.blocked_under(root)},
            "fixed": rows(comparison.newly_passing),
            "disappeared": [{k: getattr(o, k) for k in KEY + ("outcome",)} for o in comparison.disappeared],
        }
    return _finite({
        "title": title or "Layer conformance report",
        "harness_version": doc.get("harness_version"), "schema_version": doc.get("schema_version"),
        "environment": env, "check_order": list(CHECKS), "status_order": list(STATUS_ORDER),
        "look": LOOK, "count_words": COUNT_WORDS,
        "checks": checks, "baseline": baseline, "selection": _selection(doc.get("selection")),
    })


def _selection(selection) -> dict | None:
    """What --changed-since selected, as the page shows it: the bindings that ran and why, those left untouched
    (by name where the results file lists them) and why, the changed files that select none and why."""
    if not isinstance(selection, dict) or "changed_since" not in selection:
        return None
    untouched = selection.get("untouched_bindings")
    count = selection.get("untouched")
    return {"changed_since": selection.get("changed_since"), "merge_base": selection.get("merge_base"),
            "by": selection.get("by"), "changed_files": list(selection.get("changed_files") or []),
            "selected": [{"contract": s.get("contract"), "impl": s.get("impl"), "because": list(s.get("because") or [])}
                         for s in selection.get("selected") or []],
            "untouched": len(untouched) if isinstance(untouched, list) else (count if isinstance(count, int) else 0),
            "untouched_bindings": untouched if isinstance(untouched, list) else None,
            "unmapped": dict(selection.get("unmapped") or {}),
            "ignore": selection.get("ignore")}


def _embed(data: dict) -> str:
    text = json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    # inside <script>, "</script" or "<!--" in a message would end or confuse the block
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(doc: dict, baseline: dict | None = None, comparison=None, baseline_name: str | None = None,
                title: str | None = None) -> str:
    """The report page for a results document; ``baseline`` (a results document) adds the diff."""
    import jinja2
    from markupsafe import Markup
    if comparison is None and baseline is not None:
        from ..results import compare
        comparison = compare(baseline.get("results", []), doc.get("results", []))
    data = build_data(doc, comparison, baseline_name, title)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).parent)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template("template.html.j2").render(title=data["title"], data_json=Markup(_embed(data)))


def write_html(path, doc: dict, **kw) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(doc, **kw), encoding="utf-8")
    return p
