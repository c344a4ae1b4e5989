"""Expectations files: known failures, each with a reason (see ``layer_conformance.gate`` for the format)."""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ..record import FAILING, KEY as KEY_FIELDS, Record, as_records
# applying entries to records is part of the verdict (no pytest there): its functions, under their old names too
from ..verdict import apply_expectations, excuse, excused, expectation_for, stale_expectations  # noqa: F401

# "n/a": the entry accepts an n/a that rests on the layer's own word (--strict-na), as a reviewed fact, not a failure
_EXPECTED_SPELLINGS = {"fail": FAILING, "failed": ("failed",), "error": ("error",), "n/a": ("skipped",)}


def first_line(message, limit=160) -> str:
    """The message's first line, cut at a word boundary where it is longer than ``limit`` (None: whole)."""
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    if limit is None or len(line) <= limit:
        return line
    cut = line[:limit - 3]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:") + "..."


# an installed package's file, from wherever its environment lives (a venv, the system's Python)
_INSTALLED = re.compile(r"[^\s'\"(]*/(?:site|dist)-packages/")


def portable(text: str, root=None) -> str:
    """``text`` with its paths made the same on every machine: under ``root`` (the project) relative to it,
    in an installed environment from the package on (``torch/nn/modules/module.py``)."""
    if root:
        text = text.replace(str(root).rstrip("/") + "/", "")
    return _INSTALLED.sub("", text)

class ExpectationsError(Exception):
    """A malformed expectations file; the message names the file, the line and the field."""


# what makes a field a glob (fnmatch's wildcards): refused unless globs are allowed (--allow-glob-expectations)
GLOB_CHARS = re.compile(r"[*?\[]")
GLOB_FLAG = "--allow-glob-expectations"


@dataclass
class Expectation:
    patterns: dict               # field -> exact id (a glob where globs are allowed), only the fields named
    outcomes: tuple              # the outcomes it expects, e.g. ("failed", "error")
    expected: object             # as written (kept when the file is rewritten)
    reason: str = ""
    link: str = ""
    line: int = 0
    path: str = ""
    glob: bool = False           # fields are fnmatch globs (--allow-glob-expectations); else exact ids

    def _match(self, value, pattern) -> bool:
        return fnmatch.fnmatchcase(str(value), pattern) if self.glob else str(value) == pattern

    def matches(self, record: Record) -> bool:
        return all(self._match(getattr(record, k), p) for k, p in self.patterns.items())

    def could_match(self, **fields) -> bool:
        """Whether some record with these fields (each a value, or a collection of values it may have) could match:
        the fields not given may be anything."""
        return all(any(self._match(v, self.patterns[k])
                       for v in ([values] if isinstance(values, str) else values))
                   for k, values in fields.items() if k in self.patterns)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def identity(self) -> tuple:
        """What the entry excuses (its fields and outcomes): the same entry in two versions of the file."""
        return tuple(sorted(self.patterns.items())), tuple(sorted(self.outcomes))

    def describe(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.patterns.items())
        said = "; ".join(filter(None, [self.reason, self.link]))
        return f"{fields}, expected {'/'.join(self.outcomes)}" + (f" ({said})" if said else "")

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
        _fail(path, node, "expected", "expected fail, failed, error, n/a, or a list of failed/error")
    outcomes: list = []
    for w in words:
        if w not in _EXPECTED_SPELLINGS:
            _fail(path, node, "expected", f"{w!r} is not an outcome that can be expected "
                                          f"(use fail, failed, error, n/a, or a list of failed/error)")
        outcomes += [o for o in _EXPECTED_SPELLINGS[w] if o not in outcomes]
    return tuple(outcomes), written


def load_expectations(path, allow_glob: bool = False) -> list[Expectation]:
    """Parse an expectations file; ExpectationsError names file:line: field on any problem. Entries name
    exact ids; with ``allow_glob`` (--allow-glob-expectations) their fields are fnmatch globs and an entry
    may leave ``check`` out (every check), else either is refused (``exact_ids``)."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ExpectationsError(f"expectations file {path}: cannot read: {exc.strerror or exc}") from None
    return parse_expectations(text, path, allow_glob)


def exact_ids(path, entries: list[Expectation]) -> None:
    """Refuses, in one message naming the file, each entry and the flag, entries that excuse checks nobody
    named: a field that is a glob, or no ``check`` (which matches every check of the binding)."""
    loose = []
    for e in entries:
        globs = [(k, v) for k, v in e.patterns.items() if GLOB_CHARS.search(v)]
        if globs:
            loose.append(f"{e.where}: {', '.join(f'{k}: {v!r}' for k, v in globs)} is a glob")
        elif "check" not in e.patterns:
            loose.append(f"{e.where}: names no check, so it matches every check")
    if loose:
        raise ExpectationsError(
            f"invalid expectations file {loose[0]}"
            + (f" (and {len(loose) - 1} more: {'; '.join(loose[1:])})" if len(loose) > 1 else "")
            + f": an entry names the exact check it excuses (and exact contract, impl, framework, device where "
              f"it names them), so that it excuses no failure nobody listed; write the ids (--update-expectations "
              f"writes them), or pass {GLOB_FLAG} to let entries be globs")


def parse_expectations(text: str, path: str, allow_glob: bool = False) -> list[Expectation]:
    """``load_expectations`` of a file's text (``path`` names it in messages)."""
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
                                         f"match every check; name at least one (`check: \"*\"` with {GLOB_FLAG} "
                                         f"says every check on purpose)")
        outcomes, written = _expected(path, seen["expected"])
        texts = {k: _scalar(path, k, seen[k]) for k in ("reason", "link") if k in seen}
        if not texts:
            _fail(path, node, "reason", "required: say why the failure is expected (or give a `link`)")
        out.append(Expectation(patterns={k: _scalar(path, k, seen[k]) for k in KEY_FIELDS if k in seen},
                               outcomes=outcomes, expected=written, reason=texts.get("reason", ""),
                               link=texts.get("link", ""), line=node.start_mark.line + 1, path=path,
                               glob=allow_glob))
    if not allow_glob:
        exact_ids(path, out)
    return out


def added_since(expectations: list[Expectation], old: list[Expectation]) -> list[Expectation]:
    """The entries of ``expectations`` that ``old`` (the file at the base revision) does not have: same
    fields and outcomes (a reason reworded is the same entry; a field or an outcome changed is a new one)."""
    before = {e.identity for e in old}
    return [e for e in expectations if e.identity not in before]


def expectations_at(rev: str, path) -> list[Expectation]:
    """The entries of the expectations file ``path`` as it was at ``rev`` (``git show``): none where the
    file did not exist there, or did not parse. Raises OSError/CalledProcessError where git cannot be asked."""
    import subprocess
    p = Path(path).resolve()
    git = ["git", "-C", str(p.parent)]
    top = Path(subprocess.run([*git, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                              check=True).stdout.strip()).resolve()
    subprocess.run([*git, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], capture_output=True,
                   check=True)
    shown = subprocess.run([*git, "show", f"{rev}:{p.relative_to(top).as_posix()}"], capture_output=True,
                           text=True)
    if shown.returncode != 0:
        return []   # not in the tree at rev
    try:
        return parse_expectations(shown.stdout, f"{rev}:{path}", allow_glob=True)
    except ExpectationsError:
        return []


def unmatched(expectations: list[Expectation], records: list[Record]) -> list[Expectation]:
    records = as_records(records)
    return [e for e in expectations if not any(e.matches(r) for r in records)]


def updated_expectations(expectations: list[Expectation], records: list[Record],
                         root=None) -> tuple[list[dict], dict]:
    """The file's new entries: existing ones still needed (reasons kept), stale ones dropped, one exact
    entry added per failing check that nothing covers, its reason the message's first line with paths made
    ``portable`` (relative to ``root``, the project). Entries matching nothing in this run are kept
    (they may be about frameworks or devices this run did not cover)."""
    records = as_records(records)
    kept, dropped = [], []
    for e in expectations:
        mine = [r for r in records if e.matches(r)]
        stale = mine and not any(r.outcome in e.outcomes for r in mine) \
            and any(r.outcome == "passed" for r in mine)
        (dropped if stale else kept).append(e)
    added = []
    today = datetime.now(timezone.utc).date().isoformat()
    for r in sorted(records, key=Record.key):
        if r.failing and not any(e.matches(r) and r.outcome in e.outcomes for e in kept):
            first = first_line(portable(r.message or "", root)) or r.outcome
            added.append({**{k: v for k, v in zip(KEY_FIELDS, r.key()) if v}, "expected": "fail",
                          "reason": f"recorded by --update-expectations on {today}: {first}"})
    entries = [e.as_yaml() for e in kept] + added
    return entries, {"kept": len(kept), "dropped": len(dropped), "added": len(added)}


def write_expectations(path, entries: list[dict]) -> None:
    header = ("# Known conformance failures: each entry names the exact check (and contract, impl, framework,\n"
              "# device: a missing one matches anything); globs only with --allow-glob-expectations;\n"
              "# `expected` is fail, failed, error or a list; every entry needs a reason or a link.\n")
    body = yaml.safe_dump({"expectations": entries}, sort_keys=False, default_flow_style=False,
                          allow_unicode=True, width=110)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(header + body)


