"""The result record: what one check on one target came to. The one type the runner, the plugin,
the gate, the reports and the results file share.

A leaf module (it imports nothing else from the harness), so anything may import it without cycles.
The results file (``layer_conformance.results``) stores records in their JSON form (``to_json``/``from_json``).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

# the identity of a record: two records with the same key are about the same check on the same target.
# dtype: the dtype a contract's ``dtypes`` cast the inputs to, "" for the cases' own (so a file written
# before dtypes existed, which has no such field, keys the same)
KEY = ("contract", "impl", "framework", "device", "check", "dtype")
# identity fields a record may leave out (read back as "")
OPTIONAL_KEY = ("dtype",)
# what a check can come to; blocked: not judged, because of a mistake another check names (`blocked_by`)
OUTCOMES = ("passed", "failed", "blocked", "skipped", "error")
FAILING = ("failed", "error")
# what the views show: an outcome, or n/a (skipped as not applicable), xfail/xpass (an expectations entry)
STATUSES = ("error", "failed", "xpass", "xfail", "blocked", "passed", "skipped", "n/a")


@dataclass
class Record:
    contract: str
    impl: str
    framework: str
    device: str
    check: str
    outcome: str
    message: str = ""
    dtype: str = ""                  # the dtype the inputs were cast to; "" for the cases' own
    nodeid: str = ""
    details: dict | None = None      # what the check measured (largest error, tolerances, notes)
    blocked_by: str = ""             # outcome blocked: the check that names the mistake
    not_applicable: bool = False     # skipped as n/a (NotApplicable), ``message`` the reason: the one n/a field
    na_source: str = ""              # n/a: who says so (``NA_SOURCES``): the contract, the framework's known limits
                                     # (both held by the judge), or the layer's own process (a claim the gate lists)
    unavailable: bool = False        # skipped because the device is not present here
    usage_error: bool = False        # the binding does not fit its layer (the run exits 4)
    not_run: bool = False            # planned, never reported (an interrupted run)
    options: dict | None = None      # what it ran with beyond its key (arg_map, state_map, dtype, compile_backend,
                                     # executor_python): layer_conformance.reproduce's command repeats it
    duration: float | None = None    # seconds of wall time, loading the layer included
    expected: bool = False           # a failure an expectations entry covers (layer_conformance.gate)
    unexpectedly_passed: bool = False
    expectation: dict | None = None  # the covering entry: reason, link, where
    extra: dict = field(default_factory=dict)   # fields this version does not know, kept on a round trip

    def __post_init__(self):
        # text that came from the code under test is inert in every view made of the record (terminal, pytest's
        # reports, JUnit, HTML, the results file): no escape sequence can move a reader's cursor or erase a line
        self.message = inert(self.message)
        if self.details:
            self.details = inert(self.details)

    def key(self) -> tuple:
        return tuple(str(getattr(self, k)) for k in KEY)

    def status(self) -> str:
        """The verdict as every view shows it: an expectations entry turns failed into xfail and passed
        into xpass; a check skipped as not applicable is n/a. A check that was not run is an error."""
        if self.expected:
            return "xfail"
        if self.unexpectedly_passed:
            return "xpass"
        if self.outcome == "skipped" and self.not_applicable:
            return "n/a"
        return self.outcome

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    @property
    def target(self) -> str:
        """``framework-device[-dtype]``, as in the test id."""
        return "-".join(p for p in (self.framework, self.device, self.dtype) if p)

    def describe(self) -> str:
        return f"{self.contract} {self.impl} [{self.target}] {self.check}"

    def to_json(self) -> dict:
        """The JSON form: identity, outcome and message always; the other fields only when set
        (a file written before a field existed reads back the same)."""
        out: dict = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in _ALWAYS or value != f.default:
                out[f.name] = value
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: dict) -> "Record":
        """A record from its JSON form; ValueError says which field is missing or malformed."""
        if not isinstance(obj, dict):
            raise ValueError(f"a record is a mapping, not {type(obj).__name__}")
        missing = [k for k in KEY + ("outcome",) if k not in obj and k not in OPTIONAL_KEY]
        if missing:
            raise ValueError(f"record without {', '.join(missing)}")
        bad = [k for k in KEY + ("outcome",) if k in obj and not isinstance(obj[k], str)]
        if bad:
            raise ValueError(f"record field {bad[0]} is {obj[bad[0]]!r}, not a string")
        if obj["outcome"] not in OUTCOMES:
            raise ValueError(f"record outcome {obj['outcome']!r} is not one of {', '.join(OUTCOMES)}")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        fields = {k: v for k, v in obj.items() if k in known}
        if fields.get("message") is None:
            fields["message"] = ""
        return make(**fields, extra={k: v for k, v in obj.items() if k not in known})

    @classmethod
    def coerce(cls, rec) -> "Record":
        """A record, or its JSON form (a results document's ``results`` entries)."""
        return rec if isinstance(rec, cls) else cls.from_json(rec)


def make(**fields) -> Record:
    """The one constructor of a record: every record the harness makes (a check's, an n/a the contract decides, a
    lost or never-run check's, one read back from JSON) is made here (tests/meta_tests/test_one_exit.py)."""
    return Record(**fields)


def derived(record: Record, **changes) -> Record:
    """A new record: ``record`` with ``changes`` (the verdict's conclusions: an excuse, a blocker not borne out);
    the record itself never changes once its check has reported."""
    return dataclasses.replace(record, **changes, extra=dict(record.extra))


# C0 controls but tab and newline, DEL, C1 controls, and lone surrogates (which no UTF-8 stream can carry)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def inert(value):
    """``value`` with every control character and escape sequence (CSI, OSC, C1) of its text made visible as
    ``\\x1b``-style escapes; mappings and lists are made so throughout, other values kept."""
    if isinstance(value, str):
        return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, dict):
        return {inert(k): inert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(inert(v) for v in value)
    return value


# who an n/a rests on, most trusted first: a contract key the judge read before user code ran; a limit of the
# framework the judge holds itself (``check_catalog.NA_REASONS``); the layer's own process, which could say anything
NA_SOURCES = ("contract", "framework", "layer")


from .protocol.not_applicable import NotApplicable  # noqa: E402,F401  (the typed n/a: one definition, shared with the layer side)


_ALWAYS = (set(KEY) - set(OPTIONAL_KEY)) | {"outcome", "message"}


def as_records(items) -> list[Record]:
    return [Record.coerce(r) for r in items]
