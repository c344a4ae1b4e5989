"""The contract schema (``schema/contract.schema.json``, with the frameworks' names, the export formats and the
check ids filled in from their owners) and its errors said as (line, field, message) an author can act on."""
from __future__ import annotations

import importlib.resources
import json

from .problems import _field_name, _line_for, _short

SCHEMA_PATH = importlib.resources.files("layer_conformance") / "schema" / "contract.schema.json"

def schema() -> dict:
    """The contract schema as the loader uses it: the file, with the frameworks' names filled in from
    the registry (``harness/frameworks.py``) and the check ids from the checks' declarations
    (``harness/check_catalog.py``), which are their one owners."""
    from ..check_catalog import CHECK_IDS as declared_checks
    from ..frameworks import FRAMEWORKS
    out = json.loads(SCHEMA_PATH.read_text())
    out["$defs"]["check_id"]["enum"] = list(declared_checks)
    out["$defs"]["framework"]["enum"] = list(FRAMEWORKS)
    out["$defs"]["reference_framework"]["enum"] = ["numpy", *FRAMEWORKS]
    out["$defs"]["export_format"]["enum"] = [fmt for f in FRAMEWORKS.values() for fmt in f.export_formats]
    return out


_SCHEMA = schema()
# the check ids a contract may name (checks:, tolerances.checks), as the schema has them
CHECK_IDS = tuple(_SCHEMA["$defs"]["check_id"]["enum"])
# the longest per-check timeout, in a contract or on the command line
MAX_TIMEOUT = _SCHEMA["properties"]["timeout"]["maximum"]


_schema_validator = None
_inlined_defs: dict = {}


def _inline_refs(schema: dict) -> tuple[dict, dict]:
    """The schema with each local ``$ref`` replaced by the (shared) definition it names.

    jsonschema resolves a ``$ref`` on every visit; inlined, validating a contract takes ~40 % less
    time, which counts when a run plans thousands of contracts. A recursive reference stays a $ref.
    """
    defs, done, busy = schema.get("$defs", {}), {}, set()

    def walk(x):
        if isinstance(x, dict):
            ref = x.get("$ref")
            if len(x) == 1 and isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
                name = ref[8:]
                if name in busy:
                    return x
                if name not in done:
                    busy.add(name)
                    done[name] = walk(defs[name])
                    busy.discard(name)
                return done[name]
            return {k: (v if k == "$defs" else walk(v)) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    out = walk(schema)
    for name in defs:
        if name not in done:
            done[name] = walk(defs[name])
    return out, done


def _validator():
    global _schema_validator, _inlined_defs
    if _schema_validator is None:
        import jsonschema
        schema = _SCHEMA
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        inlined, _inlined_defs = _inline_refs(schema)
        _schema_validator = cls(inlined)
    return _schema_validator


def _defs():
    """Definitions by name, the very objects the validator reports in ``err.schema``."""
    _validator()
    return _inlined_defs


def _names_kind(allowed) -> str:
    allowed = set(allowed or ())
    if allowed == set(CHECK_IDS):
        return "check id"
    if allowed == set(_defs()["dtype"]["enum"]):
        return "dtype"
    if allowed == set(_defs()["framework"]["enum"]):
        return "framework"
    return "name"


def _oneof_branch(err):
    """The alternative of a oneOf the author evidently meant (by its required key), or None."""
    if not isinstance(err.instance, dict):
        return None
    for i, alt in enumerate(err.validator_value):
        alt = alt if "$ref" not in alt else _defs()[alt["$ref"].rsplit("/", 1)[1]]
        required = alt.get("required") or []
        if required and all(r in err.instance for r in required):
            return i
    return None


def _pattern_message(err) -> str:
    # the schema's patterns are anchored at the very end of the value: a YAML block scalar (|) keeps
    # its final line break, which Python's "$" alone would let through
    what = err.schema.get("description") or f"matching {err.validator_value!r}"
    tail = (" (it ends with a line break: write it on one line, or use |- instead of |)"
            if err.instance.endswith(("\n", "\r")) else "")
    return f"{err.instance!r} is not {what}{tail}"


def _schema_problems(err, lines) -> list:
    """One jsonschema error -> (line, field, message) triples an author can act on."""
    at = tuple(err.absolute_path)
    schema_path = list(err.relative_schema_path)

    def out(where, msg):
        return [(_line_for(lines, where), _field_name(where), _short(msg))]

    if "propertyNames" in schema_path:
        # the error is about a key: point at the key's own line
        where = at + (err.instance,)
        if err.validator == "pattern":
            return out(where, _pattern_message(err))
        allowed = err.validator_value if err.validator == "enum" else None
        kind = _names_kind(allowed)
        return out(where, f"unknown {kind} {err.instance!r}" + (f" (known: {', '.join(map(str, allowed))})" if allowed else ""))
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = list(err.schema.get("properties", {}))
        probs = []
        for k in err.instance:
            if k not in known:
                probs += out(at + (k,), f"unknown key {k!r}" + (f" (allowed here: {', '.join(known)})" if known else ""))
        return probs
    if err.validator == "required" and isinstance(err.instance, dict):
        return [p for r in err.validator_value if r not in err.instance
                for p in out(at, f"missing required key {r!r}")]
    if err.validator == "oneOf":
        ref = ""
        parent_schema = err.schema
        if isinstance(parent_schema, dict):
            ref = next((name for name, d in _defs().items() if d is parent_schema), "")
        branch = _oneof_branch(err)
        if branch is not None:
            sub = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] == branch]
            probs = [p for e in sub for p in _schema_problems(e, lines)]
            if probs:
                return probs
        if ref == "dim":
            return out(at, f"{err.instance!r} is not a valid dimension: use a non-negative integer or the "
                           "name of a constructor argument")
        if ref == "value_rule":
            return out(at, f"{err.instance!r} is not a value rule: use ones, zeros, reference or {{linspace: [lo, hi]}}")
        if ref == "init_rule":
            return out(at, f"{err.instance!r} is not an init rule: use ones, zeros, reference, {{linspace: [lo, hi]}}, "
                           "random or {random: {mean: m, std: s, finite: true}}")
        if ref == "native":
            return out(at, "a native entry is either {none: reason} or {class: module.Class, args: {...}, "
                           "state: {slot: name}, call: {inputs: [name, ...], kwargs: {...}}}")
        return out(at, f"{err.instance!r} matches none of the allowed forms")
    if err.validator == "pattern" and isinstance(err.instance, str):
        return out(at, _pattern_message(err))
    if err.validator == "maximum" and at == ("timeout",):
        return out(at, f"{err.instance!r} s is longer than the longest timeout, {err.validator_value:g} s "
                       f"({err.validator_value / 60:g} minutes): a check that has not finished by then has hung")
    return out(at, err.message)

