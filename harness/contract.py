"""Contract loading: YAML -> validated, line-annotated Contract objects.

A contract is data. Its structure is fixed by ``schema/contract.schema.json``
(validated with jsonschema, every error reported at once); a second, semantic
pass checks what a schema cannot express (shapes that name constructor
arguments, row counts, a reference module that imports). Every error names the
file, the line and the field.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCHEMA_PATH = Path(__file__).parent / "schema" / "contract.schema.json"
SPECS_DIR = Path(__file__).resolve().parent.parent / "specs"

CHECK_IDS = ("parameters", "buffers", "composition", "serialization", "devices",
             "values", "native", "gradients")


class ContractError(Exception):
    """A contract that cannot be used. ``problems`` holds every (line, field, message)."""

    def __init__(self, path, problems):
        self.path = str(path)
        self.problems = sorted(problems, key=lambda p: (p[0] or 0, p[1]))
        lines = [f"{self.path}:{line or '?'}: {fld}: {msg}" for line, fld, msg in self.problems]
        super().__init__("invalid contract\n" + "\n".join(lines))


# --- YAML with line numbers --------------------------------------------------

class _LineLoader(yaml.SafeLoader):
    """SafeLoader (no object construction from tags) that remembers where each field is."""


def _load_with_lines(text: str, path: str):
    """Return (data, lines) where lines maps a field path tuple to its 1-based line."""
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        lines: dict[tuple, int] = {}

        def walk(n, at):
            lines[at] = n.start_mark.line + 1
            if isinstance(n, yaml.MappingNode):
                for k, v in n.value:
                    key = loader.construct_object(k, deep=True)
                    lines[at + (key,)] = k.start_mark.line + 1
                    walk(v, at + (key,))
                    # the key's own line is more useful than the value's for a mapping
                    lines[at + (key,)] = k.start_mark.line + 1
            elif isinstance(n, yaml.SequenceNode):
                for i, v in enumerate(n.value):
                    walk(v, at + (i,))

        if node is None:
            return None, {}
        walk(node, ())
        data = loader.construct_document(node)
        return data, lines
    finally:
        loader.dispose()


def _line_for(lines: dict, at: tuple) -> int | None:
    at = tuple(at)
    while at and at not in lines:
        at = at[:-1]
    return lines.get(at)


def _field_name(at) -> str:
    out = ""
    for part in at:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


_schema_validator = None


def _validator():
    global _schema_validator
    if _schema_validator is None:
        import jsonschema
        schema = json.loads(SCHEMA_PATH.read_text())
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _schema_validator = cls(schema)
    return _schema_validator


def _schema_message(err) -> str:
    # Lead with what a contract author can act on, not with the schema's internals.
    if err.validator == "additionalProperties":
        return err.message.replace("Additional properties are not allowed", "unknown key")
    if err.validator == "propertyNames":
        return f"unknown name {err.instance!r}"
    if err.validator == "oneOf":
        return f"{err.instance!r} matches none of the allowed forms"
    return err.message


# --- the Contract object -----------------------------------------------------

@dataclass
class Contract:
    data: dict
    path: str
    lines: dict = field(default_factory=dict, repr=False)

    name = property(lambda self: self.data["name"])
    kind = property(lambda self: self.data["kind"])
    constructor = property(lambda self: dict(self.data.get("constructor") or {}))
    cases = property(lambda self: list(self.data["cases"]))
    trainable = property(lambda self: dict((self.data.get("state") or {}).get("trainable") or {}))
    non_trainable = property(lambda self: dict((self.data.get("state") or {}).get("non_trainable") or {}))
    gradients = property(lambda self: dict(self.data.get("gradients") or {"mode": "true"}))
    native = property(lambda self: dict(self.data.get("native") or {}))
    timeout = property(lambda self: self.data.get("timeout"))

    def line(self, *at) -> int | None:
        return _line_for(self.lines, at)

    def resolve_dim(self, d):
        return self.constructor[d] if isinstance(d, str) else d

    def shape(self, spec) -> tuple:
        return tuple(int(self.resolve_dim(d)) for d in spec)

    def resolve_arg(self, v):
        """``$name`` in native args refers to a constructor argument."""
        if isinstance(v, str) and v.startswith("$"):
            return self.constructor[v[1:]]
        return v

    def skip_reason(self, check: str) -> str | None:
        return ((self.data.get("checks") or {}).get(check) or {}).get("skip")

    def not_applicable(self, framework: str) -> str | None:
        return ((self.data.get("frameworks") or {}).get(framework) or {}).get("not_applicable")

    def reference(self):
        ref = self.data["reference"]
        mod = importlib.import_module(ref["module"])
        fwd = getattr(mod, ref.get("forward", "forward"))
        vjp = getattr(mod, ref.get("vjp", "vjp"), None)
        return mod, fwd, vjp

    def location(self, *at) -> str:
        line = self.line(*at)
        return f"{self.path}:{line}" if line else self.path


def _semantic_problems(data: dict, lines: dict) -> list:
    """What the schema cannot say: names that must resolve, counts that must agree."""
    problems = []
    ctor = data.get("constructor") or {}

    def bad(at, msg):
        problems.append((_line_for(lines, at), _field_name(at), msg))

    def check_shape(shape, at):
        for i, d in enumerate(shape or []):
            if isinstance(d, str):
                if d not in ctor:
                    bad(at + (i,), f"dimension {d!r} names no constructor argument")
                elif not isinstance(ctor[d], int) or isinstance(ctor[d], bool) or ctor[d] < 0:
                    bad(at + (i,), f"dimension {d!r} = {ctor[d]!r} is not a non-negative integer")

    for ci, case in enumerate(data.get("cases") or []):
        for name, inp in (case.get("inputs") or {}).items():
            at = ("cases", ci, "inputs", name)
            draw = inp.get("draw", "normal")
            if draw == "literal" or "value" in inp:
                if "value" not in inp:
                    bad(at, "draw 'literal' needs a 'value'")
                elif "shape" in inp:
                    import numpy as np
                    try:
                        got = np.asarray(inp["value"], dtype=float).shape
                    except ValueError:
                        bad(at + ("value",), "ragged literal value")
                        continue
                    check_shape(inp["shape"], at + ("shape",))
                    want = tuple(ctor.get(d, d) if isinstance(d, str) else d for d in inp["shape"])
                    if got != want:
                        bad(at + ("value",), f"literal of shape {list(got)} does not match shape {list(want)}")
                continue
            if "shape" not in inp:
                bad(at, "an input that is drawn needs a 'shape'")
                continue
            check_shape(inp["shape"], at + ("shape",))
            if "rows" in inp:
                first = inp["shape"][0] if inp["shape"] else None
                first = ctor.get(first, first) if isinstance(first, str) else first
                if first != len(inp["rows"]):
                    bad(at + ("rows",), f"{len(inp['rows'])} rows given but shape[0] is {first}")
            if draw == "uniform" and inp.get("low", 0.0) >= inp.get("high", 1.0):
                bad(at + ("low",), "uniform draw needs low < high")

    state = data.get("state") or {}
    slots = {}
    for kind in ("trainable", "non_trainable"):
        for name, slot in (state.get(kind) or {}).items():
            at = ("state", kind, name)
            if name in slots:
                bad(at, f"slot {name!r} is declared both trainable and non-trainable")
            slots[name] = kind
            check_shape(slot.get("shape"), at + ("shape",))
            if kind == "non_trainable" and slot.get("test_value") not in (None, "reference", slot.get("init")):
                pass  # a non-trainable slot may still be given a test value

    grads = data.get("gradients") or {}
    case_inputs = set()
    for case in data.get("cases") or []:
        case_inputs |= set((case.get("inputs") or {}))
    for i, w in enumerate(grads.get("wrt") or []):
        if w not in case_inputs and w not in slots:
            bad(("gradients", "wrt", i), f"{w!r} is neither an input nor a state slot")
    if grads.get("mode") == "surrogate" and grads.get("finite_difference"):
        bad(("gradients", "finite_difference"), "a surrogate gradient is not the true derivative; "
            "a finite-difference check would always fail")

    for fw, nat in (data.get("native") or {}).items():
        for key, v in (nat.get("args") or {}).items():
            if isinstance(v, str) and v.startswith("$") and v[1:] not in ctor:
                bad(("native", fw, "args", key), f"{v!r} names no constructor argument")
        for slot in (nat.get("state") or {}):
            if slot not in slots:
                bad(("native", fw, "state", slot), f"{slot!r} is not a state slot of this contract")

    ref = data.get("reference") or {}
    if ref.get("module") and not problems:
        try:
            mod = importlib.import_module(ref["module"])
        except Exception as exc:  # any import failure is the contract's problem to report
            bad(("reference", "module"), f"cannot import {ref['module']!r}: {type(exc).__name__}: {exc}")
        else:
            for key, default in (("forward", "forward"), ("vjp", "vjp")):
                fn = ref.get(key, default)
                if not callable(getattr(mod, fn, None)):
                    if key == "vjp" and "vjp" not in ref and grads.get("mode") == "none":
                        continue
                    bad(("reference", key), f"{ref['module']} has no function {fn!r}")
    return problems


def load_contract(path) -> Contract:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ContractError(path, [(None, "(file)", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        data, lines = _load_with_lines(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        msg = getattr(exc, "problem", None) or str(exc)
        raise ContractError(path, [(line, "(yaml)", f"malformed YAML: {msg}")]) from None
    if not isinstance(data, dict):
        raise ContractError(path, [(1, "(top level)", "a contract must be a mapping")])

    problems = []
    for err in _validator().iter_errors(data):
        at = tuple(err.absolute_path)
        if err.validator in ("additionalProperties", "propertyNames"):
            # point at the offending key itself
            extra = [k for k in (err.instance if isinstance(err.instance, dict) else {})
                     if err.validator == "propertyNames" or k not in err.schema.get("properties", {})]
            if err.validator == "propertyNames":
                extra = [err.instance] if not isinstance(err.instance, dict) else extra
            for k in extra or [None]:
                sub = at + ((k,) if k is not None else ())
                problems.append((_line_for(lines, sub), _field_name(sub),
                                 f"unknown key {k!r}" if k is not None else _schema_message(err)))
            continue
        problems.append((_line_for(lines, at), _field_name(at), _schema_message(err)))
    # de-duplicate (propertyNames reports per key)
    problems = list(dict.fromkeys(problems))
    if not problems:
        problems = _semantic_problems(data, lines)
    if problems:
        raise ContractError(path, problems)
    return Contract(data=data, path=str(path), lines=lines)


def bundled_contracts() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS_DIR.glob("*.yaml"))}


def find_contract(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    bundled = bundled_contracts()
    if name_or_path in bundled:
        return bundled[name_or_path]
    raise ContractError(name_or_path, [(None, "(name)", f"no bundled contract named {name_or_path!r}; "
                                        f"known: {', '.join(bundled) or 'none'}")])
