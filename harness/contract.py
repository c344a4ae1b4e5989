"""Contract loading: YAML -> validated, line-annotated Contract objects, one frozen dataclass per section.

A contract is data. It is read with a safe YAML loader (no tag ever constructs a Python
object; ``!!python/...`` tags are refused by name), its structure is fixed by
``schema/contract.schema.json`` (jsonschema), and a second, semantic pass checks what a
schema cannot express (shapes that name constructor arguments, row counts, finite
tolerances). Every problem is reported at once, each naming the file, the line and
the field; nothing but ``ContractError`` escapes the loader.

Loading runs no code: this module imports no executor, runner, adapter or framework. What needs the
reference run (a reference module that imports and defines the functions named, the reference checked
against itself) is the run's own step, ``reference_check.load_checked``, reported the same way.

Native layers are checked as far as possible without importing a framework: the class must
be a dotted ``module.Class`` path and, where that framework is installed here, its top-level
package must be findable (``importlib.util.find_spec``, which imports nothing). Whether the
submodule and class exist is left to the ``native`` check, which names the contract's
file:line when they do not.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.resources
import importlib.util
import json
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

import yaml

SCHEMA_PATH = importlib.resources.files("layer_conformance") / "schema" / "contract.schema.json"


def _specs_dir() -> Path:
    """Where the bundled contracts are.

    An installed wheel carries them as package data (``harness/specs``, mapped from the repository's
    top-level ``specs/`` at build time). A source checkout, installed editable or put on ``sys.path``,
    reads its own ``specs/`` beside the package, so that a checkout never reads another tree's contracts.
    """
    packaged = importlib.resources.files("layer_conformance") / "specs"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "specs"


SPECS_DIR = _specs_dir()


def schema() -> dict:
    """The contract schema as the loader uses it: the file, with the frameworks' names filled in from
    the registry (``harness/frameworks.py``) and the check ids from the checks' declarations
    (``harness/check_catalog.py``), which are their one owners."""
    from .check_catalog import CHECK_IDS as declared_checks
    from .frameworks import FRAMEWORKS
    out = json.loads(SCHEMA_PATH.read_text())
    out["$defs"]["check_id"]["enum"] = list(declared_checks)
    out["$defs"]["framework"]["enum"] = list(FRAMEWORKS)
    out["$defs"]["export_format"]["enum"] = [fmt for f in FRAMEWORKS.values() for fmt in f.export_formats]
    return out


_SCHEMA = schema()
# the check ids a contract may name (checks:, tolerances.checks), as the schema has them
CHECK_IDS = tuple(_SCHEMA["$defs"]["check_id"]["enum"])
# the longest per-check timeout, in a contract or on the command line
MAX_TIMEOUT = _SCHEMA["properties"]["timeout"]["maximum"]

# Hostile-input bounds: far above any real contract, far below what would hang the loader.
MAX_NODES = 100_000          # YAML nodes after alias expansion ("billion laughs")
MAX_DEPTH = 64               # nesting of mappings and sequences
MAX_ELEMENTS = 100_000_000   # elements of one state slot
MAX_MESSAGE = 300            # characters of a value quoted back in a message
# Elements of one drawn input: every check draws it several times, in float64 for the reference too.
# Settable per run (--max-input-elements, or this environment variable, which executor processes inherit).
MAX_INPUT_ELEMENTS_ENV = "CONFORMANCE_MAX_INPUT_ELEMENTS"
DEFAULT_MAX_INPUT_ELEMENTS = 16 * 2 ** 20
# The judge draws every case's inputs in float64 to check the reference against itself (and the checks draw
# them again): the elements of all drawn inputs together are bounded per contract (every case's inputs, the
# properties' and the training mode's, summed) and per run (summed over the run's contracts). Their defaults
# follow the per-input limit (twice it per contract, sixteen times per run); each is settable on its own.
# The judge's peak memory while it validates a contract stays within JUDGE_MEMORY_MULTIPLE times the bytes of
# its drawn elements in float64, over the judge's own baseline (tests/hostile/test_bounds.py measures it).
MAX_CONTRACT_ELEMENTS_ENV = "CONFORMANCE_MAX_CONTRACT_ELEMENTS"
MAX_RUN_ELEMENTS_ENV = "CONFORMANCE_MAX_RUN_ELEMENTS"
CONTRACT_ELEMENTS_PER_INPUT = 2
RUN_ELEMENTS_PER_INPUT = 16
JUDGE_MEMORY_MULTIPLE = 12  # measured about 8 (tests/hostile/test_bounds.py): the inputs, their shifted copies, the wire's bytes in flight


class ContractError(Exception):
    """A contract that cannot be used. ``problems`` holds every (line, field, message)."""

    def __init__(self, path, problems):
        self.path = str(path)
        self.problems = sorted(problems, key=lambda p: (p[0] or 0, str(p[1]), str(p[2])))
        lines = [f"{self.path}:{line or '?'}: {fld}: {msg}" for line, fld, msg in self.problems]
        n = len(self.problems)
        super().__init__(f"invalid contract ({n} problem{'s' if n != 1 else ''})\n" + "\n".join(lines))


class ContractNotFound(ContractError):
    """The name or path given does not lead to a file: a usage error, not a broken contract."""

    def __str__(self):
        return "; ".join(f"contract {self.path!r}: {msg}" for _, _, msg in self.problems)


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


# --- YAML with line numbers --------------------------------------------------

_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml parses ~10x faster


class _LineLoader(_SafeBase):
    """Safe loader (no object construction from tags) that remembers where each field is."""


_PLAIN_TAGS = frozenset(t for t in yaml.SafeLoader.yaml_constructors if t)  # null, bool, int, str, map...
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Structure(Exception):
    """What stops reading altogether: alias expansion, a recursive alias, nesting too deep."""

    def __init__(self, problems):
        self.problems = problems


def _load_with_lines(text: str):
    """Return (data, lines, problems, replaced): lines maps a field path tuple to its 1-based line.

    A node that cannot be taken as plain data (a Python or unknown tag, a value that fails
    to construct, a list as a key) is reported and replaced by a plain string, or dropped,
    so that reading goes on and every problem is listed at once. Only what could hang the
    loader (alias expansion, recursion, depth) stops it, by raising ``_Structure``.
    """
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, [], []
        lines: dict[tuple, int] = {}
        problems = []
        replaced = []  # fields whose value was replaced: no further problems are reported there
        budget = [MAX_NODES]

        def where(n):
            return n.start_mark.line + 1

        def stop(at, msg):
            raise _Structure([(lines.get(at[:1]) or 1, _field_name(at[:1]), msg)])

        def plain(n, at) -> bool:
            """Report a tag that is not plain data and make the node plain; True if it was plain."""
            if n.tag in _PLAIN_TAGS:
                return True
            if n.tag.startswith("tag:yaml.org,2002:python/"):
                msg = (f"refused YAML tag {n.tag.replace('tag:yaml.org,2002:', '!!')!r}: contracts are plain "
                       "data, loaded with a safe loader that never builds Python objects")
            else:
                msg = f"unknown YAML tag {n.tag!r}: contracts use plain mappings, lists, strings, numbers, booleans"
            problems.append((where(n), _field_name(at), msg))
            replaced.append(at)
            n.tag = {yaml.MappingNode: "tag:yaml.org,2002:map",
                     yaml.SequenceNode: "tag:yaml.org,2002:seq"}.get(type(n), "tag:yaml.org,2002:str")
            return False

        def walk(n, at, on_path):
            budget[0] -= 1
            if budget[0] < 0:
                stop(at, f"the document expands to more than {MAX_NODES} nodes (aliases repeated?); "
                         "a contract has a few hundred")
            if len(at) > MAX_DEPTH:
                stop(at, f"nested deeper than {MAX_DEPTH} levels")
            if id(n) in on_path:
                stop(at, f"an alias at {_field_name(at)} refers to a node that contains it (a recursive structure)")
            lines.setdefault(at, where(n))
            plain(n, at)
            if isinstance(n, yaml.ScalarNode):
                try:
                    loader.construct_object(n)
                except Exception as exc:  # e.g. a date-like scalar that is no date, an int too long
                    problems.append((where(n), _field_name(at), f"cannot read {_short(repr(n.value))}: {exc}"))
                    loader.recursive_objects.pop(n, None)  # the failed attempt left it marked
                    n.tag = "tag:yaml.org,2002:str"
                    replaced.append(at)
                return
            on_path = on_path | {id(n)}
            if isinstance(n, yaml.SequenceNode):
                for i, v in enumerate(n.value):
                    walk(v, at + (i,), on_path)
                return
            own, kept = {}, []
            for k, v in n.value:
                if k.tag == _MERGE_TAG:
                    kept.append((k, v))
                    continue
                if not isinstance(k, yaml.ScalarNode):
                    problems.append((where(k), _field_name(at), "a key must be a plain name, not a list or mapping"))
                    continue
                if not plain(k, at):
                    continue
                try:
                    key = loader.construct_object(k)
                except Exception as exc:
                    problems.append((where(k), _field_name(at), f"cannot read key {_short(repr(k.value))}: {exc}"))
                    continue
                if key in own:
                    problems.append((where(k), _field_name(at + (key,)),
                                     f"duplicate key {key!r} (first at line {own[key]}); YAML would keep only the last"))
                else:
                    own[key] = where(k)
                kept.append((k, v))
            n.value = kept
            loader.flatten_mapping(n)  # resolve "<<: *anchor" merges; raises YAMLError on bad ones
            kept = []
            for k, v in n.value:
                try:  # merged-in keys have not been looked at yet
                    if not isinstance(k, yaml.ScalarNode) or not plain(k, at):
                        raise ValueError("not a plain key")
                    key = loader.construct_object(k)
                except Exception:
                    problems.append((where(k), _field_name(at), "a merged-in key must be a plain name"))
                    continue
                kept.append((k, v))
                walk(v, at + (key,), on_path)
                # the key's own line is more useful than the value's for a mapping
                lines[at + (key,)] = own.get(key, where(k))
            n.value = kept

        walk(node, (), frozenset())
        data = loader.construct_document(node)
        return data, lines, problems, [_field_name(at) for at in replaced]
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
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif not str(part).isprintable() or not str(part).strip() or any(c in str(part) for c in ".[] "):
            out += f"[{str(part)!r}]"  # a key with a line break or a dot must not garble file:line:field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


# --- schema ------------------------------------------------------------------

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
        if ref == "native":
            return out(at, "a native entry is either {none: reason} or {class: module.Class, args: {...}, "
                           "state: {slot: name}}")
        return out(at, f"{err.instance!r} matches none of the allowed forms")
    if err.validator == "pattern" and isinstance(err.instance, str):
        return out(at, _pattern_message(err))
    if err.validator == "maximum" and at == ("timeout",):
        return out(at, f"{err.instance!r} s is longer than the longest timeout, {err.validator_value:g} s "
                       f"({err.validator_value / 60:g} minutes): a check that has not finished by then has hung")
    return out(at, err.message)


# --- the sections ------------------------------------------------------------
# Each section a frozen dataclass, built from validated data by ``of``: every key to the field of its name, an
# absent key to the field's default, so that each default is written once, on its field. Values a layer receives
# (constructor literals, native args, a variant) stay as the YAML read them.

_EMPTY: Mapping = MappingProxyType({})


def _ro(x) -> Mapping:
    """A mapping of the contract's, read-only (its values as read)."""
    return MappingProxyType(dict(x)) if x else _EMPTY


def _no_mapping():
    return field(default_factory=lambda: _EMPTY)


class _Section:
    """``of(mapping)``: the section from its validated mapping (None: every default). ``_convert``: how a key's
    value becomes its field's (a read-only mapping, a tuple, a nested section); ``_renamed``: keys that are no
    identifier, or name no field of their own."""
    _convert: dict = {}
    _renamed: dict = {}

    @classmethod
    def of(cls, d: dict | None):
        return cls(**{cls._renamed.get(k, k): cls._convert.get(k, _as_read)(v) for k, v in (d or {}).items()})


def _as_read(v):
    return v


@dataclass(frozen=True)
class Draw(_Section):
    """How values are drawn: an input's own draw, or one row's of ``rows``."""
    draw: str = "normal"   # normal | uniform | zeros | ones | literal
    scale: float = 1.0     # normal: the standard deviation
    low: float = 0.0       # uniform: the lower end
    high: float = 1.0      # uniform: the upper end
    value: Any = None      # literal: the values (a number or nested list), as read


@dataclass(frozen=True, kw_only=True)
class InputSpec(Draw):
    """cases[i].inputs.<name> (and a property's or the training mode's input): what is drawn, in what dtype."""
    dtype: str
    shape: tuple | None = None          # dimensions (ints or constructor names); None: a literal's own
    rows: tuple[Draw, ...] | None = None  # one draw per row (the first dimension); None: one draw for all
    differentiable: bool = True         # False: a floating input that gets no gradient
    _convert = {"shape": tuple, "rows": lambda rows: tuple(Draw.of(r) for r in rows)}

    @property
    def literal(self) -> bool:
        """Given as a value, not drawn (the rules allow ``value`` with ``draw: literal`` only)."""
        return self.draw == "literal" or self.value is not None

    @property
    def floating(self) -> bool:
        return _floating(self.dtype)


@dataclass(frozen=True)
class Case(_Section):
    """cases[i]: a named set of inputs, in the order the layer takes them."""
    name: str
    inputs: Mapping                      # input name -> InputSpec
    description: str | None = None
    dtypes: tuple[str, ...] | None = None  # the dtypes it runs in; None: the contract's
    _convert = {"inputs": lambda inputs: _ro({n: InputSpec.of(s) for n, s in inputs.items()}), "dtypes": tuple}


@dataclass(frozen=True)
class Reference(_Section):
    """reference: the module that defines the expected values, and its functions' names."""
    module: str
    forward: str = "forward"
    vjp: str = "vjp"


@dataclass(frozen=True)
class WorkedExample(_Section):
    """gradients.worked_examples[i]: a cotangent and the gradients it must give, by input or slot name."""
    inputs: Mapping
    cotangent: Any
    expected: Mapping
    description: str | None = None
    _convert = {"inputs": _ro, "expected": _ro}


@dataclass(frozen=True)
class Gradients(_Section):
    mode: str = "true"                   # true | surrogate (a declared rule) | none (not differentiated)
    rule: str | None = None              # a surrogate's rule, said in messages
    # None: every floating input not marked differentiable: false, and every trainable slot
    wrt: tuple[str, ...] | None = None
    finite_difference: bool = True       # a true gradient is also checked against finite differences
    worked_examples: tuple[WorkedExample, ...] = ()
    _convert = {"wrt": tuple, "worked_examples": lambda es: tuple(WorkedExample.of(e) for e in es)}

    @property
    def declared(self) -> bool:
        """Whether the contract declares gradients at all (mode true or surrogate)."""
        return self.mode != "none"


@dataclass(frozen=True)
class Native(_Section):
    """native.<framework>: the framework's own layer (a class), function, or why it has none."""
    class_path: str | None = None  # module.Class
    args: Mapping = _no_mapping()  # its constructor's ($name: the contract's argument)
    state: Mapping = _no_mapping()  # contract slot -> the native layer's name for it
    function: str | None = None    # module.function
    none: str | None = None        # why the framework has none
    _convert = {"args": _ro, "state": _ro}
    _renamed = {"class": "class_path"}

    @property
    def key(self) -> str:
        """The key the contract names it under (for file:line)."""
        return "function" if self.function is not None else "class"


@dataclass(frozen=True)
class Composition(_Section):
    in_features: int | None = None  # the width of the dense layers around it; None: the input's last dimension
    skip: str | None = None


@dataclass(frozen=True)
class Tolerance(_Section):
    rtol: float
    atol: float
    ulps: float | None = None  # 16-bit outputs: the allowance in ulps; None: the table's


def _tolerance_table(t) -> Mapping:
    return _ro({dtype: Tolerance.of(e) for dtype, e in t.items()})


@dataclass(frozen=True)
class Tolerances(_Section):
    default: Mapping = _no_mapping()  # dtype -> Tolerance
    checks: Mapping = _no_mapping()   # check id -> dtype -> Tolerance
    _convert = {"default": _tolerance_table,
                "checks": lambda checks: _ro({c: _tolerance_table(t) for c, t in checks.items()})}

    def declared(self, check: str, dtype: str) -> Tolerance | None:
        """The contract's entry for ``check`` on ``dtype``: the check's own, else the default's; None: none."""
        return self.checks.get(check, _EMPTY).get(dtype) or self.default.get(dtype)


@dataclass(frozen=True)
class Slot(_Section):
    """state.trainable.<slot> / state.non_trainable.<slot>."""
    shape: tuple
    dtype: str
    init: Any                # a value rule: ones | zeros | reference | {linspace: [lo, hi]}
    test_value: Any = None   # the values check's state; None: the initial value
    description: str | None = None
    _convert = {"shape": tuple}


@dataclass(frozen=True)
class Property(_Section):
    kind: str                          # mean_zero | mean_square | causal_mask
    input: InputSpec | None = None     # None: float32, normal, in the shape the property gives
    after_dense: tuple | None = None   # [in, out]: the property of a dense layer followed by this one
    ulps: float = 64                   # the allowance, in ulps of the output's dtype
    up_to: Any = "max_len"             # causal_mask: the longest prefix checked (a dimension)
    description: str | None = None
    _convert = {"input": InputSpec.of, "after_dense": tuple}


@dataclass(frozen=True)
class Train(_Section):
    """modes.train: how the training mode differs."""
    kind: str                  # inverted_dropout
    rate: Any                  # a number in (0, 1), or $name of a constructor argument
    input: InputSpec           # an input as a case declares one
    false_alarm: float = 1e-9  # the chance a correct layer fails the statistical test
    _convert = {"input": InputSpec.of}


@dataclass(frozen=True)
class Modes(_Section):
    eval: str    # identity
    train: Train
    _convert = {"train": Train.of}


@dataclass(frozen=True)
class StrictLoading(_Section):
    variant: Mapping          # constructor arguments of a layer without the optional slots
    slots: tuple[str, ...]    # the slots it lacks
    _convert = {"variant": _ro, "slots": tuple}


@dataclass(frozen=True)
class ForwardExpected(_Section):
    output: Any
    tangent: Any


@dataclass(frozen=True)
class ForwardExample(_Section):
    """forward_mode.worked_examples[i]: inputs and tangents, and the output and output tangent they give."""
    inputs: Mapping
    tangents: Mapping
    expected: ForwardExpected
    description: str | None = None
    _convert = {"inputs": _ro, "tangents": _ro, "expected": ForwardExpected.of}


@dataclass(frozen=True)
class ForwardMode(_Section):
    worked_examples: tuple[ForwardExample, ...] = ()
    _convert = {"worked_examples": lambda es: tuple(ForwardExample.of(e) for e in es)}


@dataclass(frozen=True)
class SecondOrder(_Section):
    reference: str                       # the reference's Hessian-vector product
    cases: tuple[str, ...] | None = None  # None: every case
    description: str | None = None
    _convert = {"cases": tuple}


@dataclass(frozen=True)
class Compiled(_Section):
    not_applicable: str | None = None
    allow_graph_breaks: str | None = None  # why graph breaks are expected; None: a break fails
    max_recompiles: int | None = None      # None: one per new input size


@dataclass(frozen=True)
class Export(_Section):
    formats: tuple[str, ...] | None = None  # None: every format the framework has
    not_applicable: str | None = None
    _convert = {"formats": tuple}


@dataclass(frozen=True)
class MixedPrecision(_Section):
    not_applicable: str | None = None


@dataclass(frozen=True)
class Batching(_Section):
    axis: int = 0
    cases: tuple[str, ...] | None = None  # None: every case whose batched inputs share a size at ``axis``
    vmap: str = "optional"  # "required": a layer the framework's vectorising transform cannot run fails, not n/a
    not_applicable: str | None = None  # why its examples are not independent (a batch statistic)
    _convert = {"cases": tuple}


@dataclass(frozen=True)
class Construction(_Section):
    # "required": a torch layer without reset_parameters fails (it cannot be initialised after construction on
    # meta); "optional": that part is n/a, with the reason
    reset_parameters: str = "optional"
    not_applicable: str | None = None  # why the ways real code builds a layer do not apply to it


@dataclass(frozen=True)
class Aliasing(_Section):
    in_place: bool = False  # the layer writes into its input on purpose (the change is expected, and must show)
    not_applicable: str | None = None


@dataclass(frozen=True)
class Layout(_Section):
    not_applicable: str | None = None  # why strides cannot apply (a layer that takes its input's memory as given)


@dataclass(frozen=True)
class Abstract(_Section):
    # the symbolic batch is batching's axis, on the first of batching's cases (n/a where batching is)
    not_applicable: str | None = None  # why the layer has no shape without data (an output shaped by values)


# --- the Contract object -----------------------------------------------------
# One typed accessor per section: checks read a contract through these, never through ``data``, which holds
# the contract as read (for this module's rules, ``for_dtype`` and serialising).

@dataclass
class Contract:
    data: dict
    path: str
    lines: dict = field(default_factory=dict, repr=False)
    drawn_elements: int = field(default=0, repr=False)  # every drawn input's elements, summed (ElementBudget)
    digest: str = field(default="", repr=False)  # sha256 of the file's bytes (what the reference's check is kept by)
    # built once, with the contract (checks walk the cases over and over)
    _cases: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self._cases = tuple(Case.of(c) for c in self.data["cases"])

    name = property(lambda self: self.data["name"])
    kind = property(lambda self: self.data["kind"])
    description = property(lambda self: self.data.get("description"))
    source = property(lambda self: self.data.get("source"))
    constructor = property(lambda self: dict(self.data.get("constructor") or {}))
    cases = property(lambda self: self._cases)  # (Case, ...)
    reference = property(lambda self: Reference.of(self.data["reference"]))
    trainable = property(lambda self: {n: Slot.of(s) for n, s in ((self.data.get("state") or {}).get("trainable")
                                                                  or {}).items()})
    non_trainable = property(lambda self: {n: Slot.of(s) for n, s in ((self.data.get("state") or {})
                                                                      .get("non_trainable") or {}).items()})
    gradients = property(lambda self: Gradients.of(self.data.get("gradients")))
    native = property(lambda self: {fw: Native.of(n) for fw, n in (self.data.get("native") or {}).items()})
    composition = property(lambda self: Composition.of(self.data.get("composition")))
    tolerances = property(lambda self: Tolerances.of(self.data.get("tolerances")))
    timeout = property(lambda self: self.data.get("timeout"))
    output_dtype = property(lambda self: self.data.get("output_dtype"))  # None: the first floating input's
    dtypes = property(lambda self: self.data.get("dtypes"))  # [float dtype] or None: the cases' own only
    accumulate = property(lambda self: self.data.get("accumulate"))  # the statistics' least precision, or None
    dtype = None  # the dtype this contract's floating inputs are cast to (a view from ``for_dtype``), None: own
    own_dtype = None  # a view's: the cases' declared dtype
    viewed = None  # a view's: the contract it is a view of (``for_dtype``)

    @property
    def default_dtype(self) -> str:
        """The cases' own floating dtype: checks that are not per dtype run in it, under unchanged ids."""
        return default_dtype_of(self.cases)

    def case_dtypes(self, case: Case) -> list[str]:
        """The dtypes ``case`` runs in: its own ``dtypes``, else the contract's, else its declared dtype."""
        return list(case.dtypes or self.data.get("dtypes") or [self.default_dtype])

    def extra_dtypes(self) -> list[str]:
        """The dtypes besides the default that some case runs in: one target each, per-dtype checks only."""
        out = [d for c in self.cases for d in self.case_dtypes(c)]
        return [d for d in dict.fromkeys(out) if d != self.default_dtype]

    def for_dtype(self, dtype: str | None) -> "Contract":
        """This contract as it runs in ``dtype``: the cases that run in it, with their floating inputs,
        the state slots and a floating ``output_dtype`` in ``dtype`` (the default dtype: the cases only).
        Without any ``dtypes`` declaration, the contract itself."""
        dtype = dtype or self.default_dtype
        if dtype == self.default_dtype and not self.dtypes and not any(c.dtypes is not None for c in self.cases):
            return self
        cast = dtype != self.default_dtype

        def recast(spec):
            spec = dict(spec)
            if cast and _floating(spec.get("dtype")):
                spec["dtype"] = dtype
            return spec
        data = dict(self.data)
        # a dtype no declaration names (asked for directly, as the harness's tests do) takes every case
        declared = dtype == self.default_dtype or dtype in self.extra_dtypes()
        data["cases"] = [{**raw, "inputs": {n: recast(i) for n, i in raw["inputs"].items()}}
                         for raw, c in zip(self.data["cases"], self.cases)
                         if not declared or dtype in self.case_dtypes(c)]
        if cast:
            state = dict(data.get("state") or {})
            for kind in ("trainable", "non_trainable"):
                if state.get(kind):
                    state[kind] = {n: recast(s) for n, s in state[kind].items()}
            data["state"] = state
            if _floating(data.get("output_dtype")):
                data["output_dtype"] = dtype
            # the inputs drawn outside the cases (a property's, the training mode's) too
            data["properties"] = [{**p, "input": recast(p["input"])} if isinstance(p.get("input"), dict) else p
                                  for p in self.data.get("properties") or []]
            modes = self.data.get("modes") or {}
            train = modes.get("train")
            if isinstance(train, dict) and isinstance(train.get("input"), dict):
                data["modes"] = {**modes, "train": {**train, "input": recast(train["input"])}}
        view = Contract(data=data, path=self.path, lines=self.lines)
        view.dtype = dtype if cast else None
        view.own_dtype = self.default_dtype
        view.viewed = self
        return view
    properties = property(lambda self: [Property.of(p) for p in self.data.get("properties") or []])
    modes = property(lambda self: _section(Modes, self.data.get("modes")))  # None: one mode
    strict_loading = property(lambda self: _section(StrictLoading, self.data.get("strict_loading")))  # None: not asked
    forward_mode = property(lambda self: _section(ForwardMode, self.data.get("forward_mode")))  # None: not asked
    second_order = property(lambda self: _section(SecondOrder, self.data.get("second_order")))  # None: not asked
    compiled = property(lambda self: Compiled.of(self.data.get("compiled")))
    export = property(lambda self: Export.of(self.data.get("export")))
    mixed_precision = property(lambda self: MixedPrecision.of(self.data.get("mixed_precision")))
    batching = property(lambda self: Batching.of(self.data.get("batching")))
    construction = property(lambda self: Construction.of(self.data.get("construction")))
    aliasing = property(lambda self: Aliasing.of(self.data.get("aliasing")))
    abstract = property(lambda self: Abstract.of(self.data.get("abstract")))
    layout = property(lambda self: Layout.of(self.data.get("layout")))

    @property
    def native_gradients(self) -> tuple[set[str], set[str]]:
        """(agree, record): the cases whose gradients must agree with the native function's, and those
        whose are only recorded. Without a declaration every case agrees."""
        declared = self.data.get("native_gradients") or {}
        record = set(declared.get("record") or [])
        return set(declared.get("agree") or [c.name for c in self.cases if c.name not in record]), record

    def differentiated(self, case: Case) -> tuple[list[str], list[int], list[str]]:
        """Which inputs (names, and indices of the differentiated ones) and trainable slots the
        contract differentiates in ``case``: ``gradients.wrt`` where given, else every floating input
        not marked ``differentiable: false`` and every trainable slot. The one place that decides it."""
        inputs = [(n, s.dtype, s.differentiable) for n, s in case.inputs.items()]
        return _differentiated(self.gradients.wrt, inputs, self.trainable)

    def line(self, *at) -> int | None:
        return _line_for(self.lines, at)

    def resolve_dim(self, d):
        return self.constructor[d] if isinstance(d, str) else d

    def shape(self, spec) -> tuple:
        return tuple(int(self.resolve_dim(d)) for d in spec)

    def resolve_arg(self, v):
        """``$name`` in native args (and a train rate) refers to a constructor argument."""
        if isinstance(v, str) and v.startswith("$"):
            return self.constructor[v[1:]]
        return v

    def skip_reason(self, check: str) -> str | None:
        return ((self.data.get("checks") or {}).get(check) or {}).get("skip")

    def not_applicable(self, framework: str) -> str | None:
        return ((self.data.get("frameworks") or {}).get(framework) or {}).get("not_applicable")

    def location(self, *at) -> str:
        line = self.line(*at)
        return f"{self.path}:{line}" if line else self.path

    def problem(self, at: tuple, message: str) -> tuple:
        """A problem found after loading (the reference's own check), as the loader reports one: (line, field,
        message), for ``ContractError``."""
        return self.line(*at), _field_name(at), _short(message)


def _section(cls, d):
    """An optional section: None where the contract has none (the check is not asked for)."""
    return None if d is None else cls.of(d)


def default_dtype_of(cases) -> str:
    """The first floating input's declared dtype (float32 where no case has one); ``cases``: Case objects, or
    the cases as read (the rules, which trust no type)."""
    for case in cases:
        dtypes = [s.dtype for s in case.inputs.values()] if isinstance(case, Case) else \
            [_map(s).get("dtype") for s in _map(_map(case).get("inputs")).values()]
        for dtype in dtypes:
            if _floating(dtype):
                return dtype
    return "float32"


def _differentiated(declared, inputs: list, trainable) -> tuple[list[str], list[int], list[str]]:
    """``inputs``: (name, dtype, differentiable) in order; the rules pass them as read, ``Contract`` from its cases."""
    names = [name for name, _, _ in inputs]
    idx = [i for i, (name, dtype, differentiable) in enumerate(inputs)
           if (declared is None and _floating(dtype) and differentiable) or (declared and name in declared)]
    return names, idx, [s for s in trainable if declared is None or s in declared]


# --- section rules -----------------------------------------------------------
# What the schema cannot say, one validator per top-level section (SECTION_RULES). They run even
# when the schema pass found problems (so that every problem is listed at once), hence they trust
# no type: every access goes through _map / _seq. A rule that can be decided from the contract alone
# lives here, never in a check.

def _map(x) -> dict:
    return x if isinstance(x, dict) else {}


def _seq(x) -> list:
    return x if isinstance(x, list) else []


def _str(x) -> str:
    if not isinstance(x, str):
        raise TypeError(f"{x!r} is not a string")
    return x


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _numeric_shape(value):
    """The shape of a nested list of numbers, or a reason it is not one."""
    import numpy as np

    def numbers_only(v):
        if isinstance(v, list):
            return all(numbers_only(e) for e in v)
        return _is_number(v) or isinstance(v, bool)
    if not numbers_only(value):
        return None, "not a (nested) list of numbers"
    try:
        return np.asarray(value, dtype=float).shape, None
    except OverflowError:
        return None, "holding a number too large for float64"
    except (ValueError, TypeError):
        return None, "ragged: the rows have different lengths"


def _floating(dtype) -> bool:
    return isinstance(dtype, str) and dtype.startswith(("float", "bfloat"))


class _Rules:
    """What the section validators share: the data, where each field is, the names other sections
    refer to (constructor arguments, case inputs, state slots), and the problems found so far."""

    def __init__(self, data: dict, lines: dict, max_input_elements: int, names_of=None):
        self.data, self.lines, self.max_input_elements = data, lines, max_input_elements
        self.names_of = names_of  # load_contract's reference_names (None: the reference is not looked at)
        self.problems: list = []
        self.drawn_elements = 0       # every drawn input's elements, summed (layer_conformance.contract.ElementBudget)
        self.oversized = False        # an input over the per-input limit (said there; the sum is not said again)
        self.ctor = _map(data.get("constructor"))
        self.cases = [_map(c) for c in _seq(data.get("cases"))]
        self.case_names = [c["name"] for c in self.cases if isinstance(c.get("name"), str)]
        self.case_inputs: dict = {}  # input name -> its spec in the first case that has it
        for case in self.cases:
            for name, inp in _map(case.get("inputs")).items():
                self.case_inputs.setdefault(name, _map(inp))
        state = _map(data.get("state"))
        self.slots: dict = {}  # slot -> trainable | non_trainable (the first declaration)
        for kind in ("trainable", "non_trainable"):
            for name in _map(state.get(kind)):
                self.slots.setdefault(name, kind)
        self._reference = None

    def section(self, name) -> dict:
        return _map(self.data.get(name))

    def bad(self, at, msg):
        self.problems.append((_line_for(self.lines, at), _field_name(at), _short(msg)))

    def dim_value(self, d):
        """A dimension's integer value, or None where it is not (yet) one."""
        if isinstance(d, str):
            v = self.ctor.get(d)
            return v if _is_int(v) and v >= 0 else None
        return d if _is_int(d) and d >= 0 else (int(d) if isinstance(d, float) and d.is_integer() and d >= 0 else None)

    def check_shape(self, shape, at, drawn=False):
        """Report dimensions that do not resolve; a drawn input must also be non-empty and not too large."""
        size = 1
        for i, d in enumerate(_seq(shape)):
            if isinstance(d, str):
                if d not in self.ctor:
                    self.bad(at + (i,), f"dimension {d!r} names no constructor argument"
                             + (f" (constructor: {', '.join(map(str, self.ctor))})" if self.ctor
                                else " (there is no constructor)"))
                elif not _is_int(self.ctor[d]) or self.ctor[d] < 0:
                    self.bad(at + (i,), f"dimension {d!r} = {self.ctor[d]!r} is not a non-negative integer")
            v = self.dim_value(d)
            if drawn and v == 0:
                # an empty tensor passes every elementwise comparison: the checks would be vacuous
                named = f"dimension {d!r} = 0" if isinstance(d, str) else "dimension 0"
                self.bad(at + (i,), f"{named} makes the input empty; every input needs at least one element")
            size = size * v if v is not None and size is not None else None
        limit = self.max_input_elements if drawn else MAX_ELEMENTS
        if drawn and size is not None:
            self.drawn_elements += size
            self.oversized = self.oversized or size > limit
        if size is not None and size > limit:
            self.bad(at, f"{size} elements is more than the {limit} allowed per "
                     + (f"input (--max-input-elements or {MAX_INPUT_ELEMENTS_ENV} raises it)" if drawn
                        else "state slot"))

    def finite(self, value, at):
        if isinstance(value, float) and not math.isfinite(value):
            self.bad(at, f"{value!r} is not a finite number")
        elif _is_int(value) and abs(value) > 2 ** 53:  # would not survive float()
            self.bad(at, f"{value} is too large")

    def check_draw(self, spec, at):
        for key in ("scale", "low", "high"):
            self.finite(spec.get(key), at + (key,))
        if spec.get("draw", "normal") == "uniform":
            low, high = spec.get("low", 0.0), spec.get("high", 1.0)
            if _is_number(low) and _is_number(high) and not low < high:
                self.bad(at + ("low",), f"uniform draw needs low < high (low {low}, high {high})")

    def check_other_input(self, inp, at):
        """A drawn input outside the cases (a property's, the training mode's)."""
        if isinstance(inp, dict) and "shape" in inp:
            self.check_shape(inp["shape"], at + ("shape",), drawn=True)

    def reference_names(self):
        """(names the reference module defines, why it cannot be imported), or (None, None) where the
        contract names no importable-looking module, or the loader was given no ``reference_names``. Never
        imported here: a reference module is code under review too (the caller's ``reference_names`` imports
        it in the reference executor)."""
        if self._reference is None:
            module = self.section("reference").get("module")
            if self.names_of is None or not (isinstance(module, str) and module
                                             and all(p.isidentifier() for p in module.split("."))):
                self._reference = (None, None)
            else:
                limit = self.data.get("timeout")  # the reference's import gets the checks' time limit
                limit = float(limit) if isinstance(limit, (int, float)) and 0 < limit < 1e6 else None
                names, why = self.names_of(module, limit)
                self._reference = (None, why) if why else (set(names), None)
        return self._reference

    def reference_has(self, key: str, default: str) -> bool | None:
        """Whether the reference defines the function ``reference.<key>`` names; None: unknown."""
        names, _ = self.reference_names()
        fn = self.section("reference").get(key, default)
        return None if names is None or not isinstance(fn, str) else fn in names


def _schema_only(r: _Rules):
    """The schema says all there is to say about this section."""


def _rules_cases(r: _Rules):
    seen = {}
    for ci, case in enumerate(r.cases):
        cname = case.get("name")
        if isinstance(cname, str):
            if cname in seen:
                r.bad(("cases", ci, "name"), f"case name {cname!r} is used twice (also case {seen[cname]})")
            seen.setdefault(cname, ci)
        for name, inp in _map(case.get("inputs")).items():
            at = ("cases", ci, "inputs", name)
            if isinstance(inp, dict):
                _rules_case_input(r, inp, at)


def _rules_case_input(r: _Rules, inp: dict, at: tuple):
    draw = inp.get("draw", "normal")
    if draw == "literal" or "value" in inp:
        if "value" not in inp:
            r.bad(at, "draw 'literal' needs a 'value'")
            return
        if draw != "literal":
            r.bad(at + ("value",), f"'value' goes with draw: literal, not draw: {draw!r}")
        got, why = _numeric_shape(inp["value"]) if isinstance(inp["value"], list) else (None, None)
        if why:
            r.bad(at + ("value",), f"literal value is {why}")
        elif got is not None and "shape" not in inp and 0 in got:
            r.bad(at + ("value",), f"literal of shape {list(got)} is empty; every input needs at least one element")
        if "shape" in inp:
            r.check_shape(inp["shape"], at + ("shape",), drawn=True)
            want = [r.dim_value(d) for d in _seq(inp["shape"])]
            if got is not None and isinstance(inp["shape"], list) and None not in want and tuple(got) != tuple(want):
                r.bad(at + ("value",), f"literal of shape {list(got)} does not match shape {want}")
        return
    if "shape" not in inp:
        r.bad(at, "an input that is drawn needs a 'shape'")
        return
    r.check_shape(inp["shape"], at + ("shape",), drawn=True)
    r.check_draw(inp, at)
    if "rows" in inp:
        rows, shape = _seq(inp["rows"]), _seq(inp["shape"])
        if not shape:
            r.bad(at + ("rows",), "'rows' needs a shape with at least one dimension")
        else:
            first = r.dim_value(shape[0])
            if first is not None and first != len(rows):
                r.bad(at + ("rows",), f"{len(rows)} rows given but shape[0] is {first}")
        for ri, row in enumerate(rows):
            if isinstance(row, dict):
                r.check_draw(row, at + ("rows", ri))
                if row.get("draw") == "literal" or "value" in row:
                    r.bad(at + ("rows", ri), "a row is drawn (normal, uniform, zeros, ones); "
                          "give a literal input as a whole 'value' instead")


def _rules_state(r: _Rules):
    state = r.section("state")
    seen = set()
    for kind in ("trainable", "non_trainable"):
        for name, slot in _map(state.get(kind)).items():
            at = ("state", kind, name)
            if name in seen:
                r.bad(at, f"slot {name!r} is declared both trainable and non-trainable")
            seen.add(name)
            slot = _map(slot)
            r.check_shape(slot.get("shape"), at + ("shape",))
            for rule_key in ("init", "test_value"):
                rule = slot.get(rule_key)
                if isinstance(rule, dict):
                    for j, v in enumerate(_seq(rule.get("linspace"))):
                        r.finite(v, at + (rule_key, "linspace", j))
            names, _ = r.reference_names()
            module = r.section("reference").get("module")
            if slot.get("init") == "reference" and names is not None and f"init_{name}" not in names:
                r.bad(at + ("init",), f"init: reference needs a function init_{name} in {module}")
    if r.data.get("kind") == "function" and r.slots:
        r.bad(("state",), "a function contract has no state; declare kind: layer")


def _rules_reference(r: _Rules):
    ref = r.section("reference")
    names, why = r.reference_names()
    if why:
        r.bad(("reference", "module"), f"cannot import {ref.get('module')!r}: {why}")
    if names is None:
        return
    for key in ("forward", "vjp"):
        if r.reference_has(key, key) is False:
            if key == "vjp" and "vjp" not in ref and r.section("gradients").get("mode") == "none":
                continue  # nothing asks for the default vjp
            r.bad(("reference", key), f"{ref['module']} has no function {ref.get(key, key)!r}")


def _rules_gradients(r: _Rules):
    grads = r.section("gradients")
    for i, w in enumerate(_seq(grads.get("wrt"))):
        if not isinstance(w, str):
            continue
        if w not in r.case_inputs and w not in r.slots:
            r.bad(("gradients", "wrt", i), f"{w!r} is neither an input nor a state slot")
        elif w in r.case_inputs and "dtype" in r.case_inputs[w] and not _floating(r.case_inputs[w]["dtype"]):
            r.bad(("gradients", "wrt", i), f"input {w!r} is {r.case_inputs[w]['dtype']}: only floating inputs "
                                           "have gradients")
    if grads.get("mode") == "surrogate" and grads.get("finite_difference") is True:
        r.bad(("gradients", "finite_difference"), "a surrogate gradient is not the true derivative; "
              "a finite-difference check would always fail")
    for ei, ex in enumerate(_seq(grads.get("worked_examples"))):
        ex = _map(ex)
        shapes = {}
        for part in ("inputs", "expected"):
            for name, value in _map(ex.get(part)).items():
                at = ("gradients", "worked_examples", ei, part, name)
                if part == "inputs" and name not in r.case_inputs:
                    r.bad(at, f"{name!r} is not an input of any case")
                if part == "expected" and name not in r.case_inputs and name not in r.slots:
                    r.bad(at, f"{name!r} is neither an input nor a state slot")
                got, why = _numeric_shape(value) if isinstance(value, list) else (None, None)
                if why:
                    r.bad(at, f"value is {why}")
                elif got is not None:
                    if part == "expected" and name in shapes and shapes[name] != got:
                        r.bad(at, f"expected gradient of shape {list(got)} for an input of shape {list(shapes[name])}")
                    shapes.setdefault(name, got)
        if isinstance(ex.get("cotangent"), list):
            _, why = _numeric_shape(ex["cotangent"])
            if why:
                r.bad(("gradients", "worked_examples", ei, "cotangent"), f"value is {why}")


def _rules_native(r: _Rules):
    from .frameworks import FRAMEWORKS, installed  # no framework import: find_spec only
    for fw, nat in r.section("native").items():
        nat = _map(nat)
        if isinstance(nat.get("function"), str) and r.data.get("kind") == "layer":
            r.bad(("native", fw, "function"), f"native {nat['function']!r} is a function but the contract is "
                                              "a layer; name a class instead")
        for key, v in _map(nat.get("args")).items():
            if isinstance(v, str) and v.startswith("$") and v[1:] not in r.ctor:
                r.bad(("native", fw, "args", key), f"{v!r} names no constructor argument")
        for slot in _map(nat.get("state")):
            if slot not in r.slots:
                r.bad(("native", fw, "state", slot), f"{slot!r} is not a state slot of this contract")
        cls = nat.get("class")
        if isinstance(cls, str):
            top, dot, _ = cls.partition(".")
            if not dot:
                r.bad(("native", fw, "class"), f"{cls!r} is not a dotted module.Class path")
            elif fw in FRAMEWORKS and installed(fw) and not _findable(top):
                r.bad(("native", fw, "class"), f"{cls!r}: no module {top!r} here, although {fw} is installed")


def _rules_native_gradients(r: _Rules):
    for key in ("agree", "record"):
        for i, name in enumerate(_seq(r.section("native_gradients").get(key))):
            if isinstance(name, str) and name not in r.case_names:
                r.bad(("native_gradients", key, i), f"{name!r} names no case (cases: {', '.join(r.case_names)})")


def _rules_composition(r: _Rules):
    width = r.section("composition").get("in_features")
    if _is_int(width) and width * width > MAX_ELEMENTS:
        r.bad(("composition", "in_features"), f"{width} makes dense layers of {width * width} weights")


def _rules_tolerances(r: _Rules):
    tol = r.section("tolerances")
    tables = [(("tolerances", "default"), tol.get("default"))]
    tables += [(("tolerances", "checks", c), t) for c, t in _map(tol.get("checks")).items()]
    for at, table in tables:
        for dtype, entry in _map(table).items():
            for key in ("rtol", "atol", "ulps"):
                r.finite(_map(entry).get(key), at + (dtype, key))


def _case_floating(case: dict) -> list[str]:
    return [_map(i).get("dtype") for i in _map(case.get("inputs")).values() if _floating(_map(i).get("dtype"))]


def _rules_dtypes(r: _Rules):
    """Top-level and per-case ``dtypes``: something to cast, and every target with a case to run."""
    top = r.data.get("dtypes")
    declared = [(("dtypes",), top)] if isinstance(top, list) else []
    declared += [(("cases", i, "dtypes"), c["dtypes"]) for i, c in enumerate(r.cases) if isinstance(c.get("dtypes"), list)]
    if not declared:
        return
    for at, _ in declared:
        if at[0] == "cases" and not _case_floating(r.cases[at[1]]):
            r.bad(at, "the case has no floating input to cast to these dtypes")
    if isinstance(top, list) and not any(_case_floating(c) for c in r.cases):
        r.bad(("dtypes",), "no case has a floating input to cast to these dtypes")
    default = default_dtype_of(r.cases)
    runs_default = [c for c in r.cases if default in (c.get("dtypes") if isinstance(c.get("dtypes"), list)
                                                     else top if isinstance(top, list) else [default])]
    if r.cases and not runs_default:
        r.bad(("dtypes",) if isinstance(top, list) else ("cases",),
              f"no case runs in {default}, the cases' own dtype, which every check that is not per dtype uses; "
              f"list {default} in some case's dtypes")


def _rules_accumulate(r: _Rules):
    acc = r.data.get("accumulate")
    if acc is None:
        return
    listed = set(_seq(r.data.get("dtypes"))) | {d for c in r.cases for d in _seq(c.get("dtypes"))}
    if not listed & {"float16", "bfloat16"}:
        r.bad(("accumulate",), f"accumulate: {acc} says how 16-bit inputs are reduced, and the contract declares "
                               "no 16-bit dtype (dtypes: [bfloat16, float16])")
    elif acc in ("float16", "bfloat16"):
        r.bad(("accumulate",), f"accumulate: {acc} is a 16-bit accumulator: state the precision the statistics "
                               "must at least have (float32 or float64)")


def _rules_timeout(r: _Rules):
    r.finite(r.data.get("timeout"), ("timeout",))


def _rules_properties(r: _Rules):
    for i, prop in enumerate(_seq(r.data.get("properties"))):
        prop = _map(prop)
        r.check_other_input(prop.get("input"), ("properties", i, "input"))
        if prop.get("kind") == "mean_square" and not _is_number(r.ctor.get("eps")):
            r.bad(("properties", i, "kind"), "property mean_square needs a numeric constructor argument 'eps' "
                                             f"(constructor: {', '.join(map(str, r.ctor)) or 'none'})")


def _rules_modes(r: _Rules):
    train = _map(r.section("modes").get("train"))
    r.check_other_input(train.get("input"), ("modes", "train", "input"))
    if "rate" in train:
        rate = train["rate"]
        if isinstance(rate, str) and rate.startswith("$") and rate[1:] in r.ctor:
            rate = r.ctor[rate[1:]]
        if not _is_number(rate) or not 0 < rate < 1:
            said = f"{train['rate']!r}" + (f" = {rate!r}" if rate is not train["rate"] else "")
            r.bad(("modes", "train", "rate"), f"{said} is not a dropout rate: a number in (0, 1), or $name of a "
                                              "constructor argument that holds one")
    inp = _map(train.get("input"))
    if inp.get("draw") == "zeros" or (inp.get("draw") == "literal" and 0 in _flat(inp.get("value"))):
        r.bad(("modes", "train", "input"), "the training input holds exact zeros, which would read as dropped; "
                                           "draw uniform away from 0")


def _flat(value) -> list:
    if isinstance(value, list):
        return [x for v in value for x in _flat(v)]
    return [value]


def _rules_strict_loading(r: _Rules):
    for i, slot in enumerate(_seq(r.section("strict_loading").get("slots"))):
        if isinstance(slot, str) and slot not in r.slots:
            r.bad(("strict_loading", "slots", i), f"{slot!r} is not a state slot of this contract"
                  + (f" (slots: {', '.join(r.slots)})" if r.slots else " (it declares none)"))


def _rules_forward_mode(r: _Rules):
    spec = r.data.get("forward_mode")
    if spec is None:
        return
    first = list(_map(r.cases[0].get("inputs"))) if r.cases else None
    for k, ex in enumerate(_seq(_map(spec).get("worked_examples"))):
        ex = _map(ex)
        given, tangents = set(_map(ex.get("inputs"))), set(_map(ex.get("tangents")))
        stray = sorted((given ^ set(first)) | (tangents - set(first))) if first is not None else []
        if stray:
            r.bad(("forward_mode", "worked_examples", k), f"names {stray}, which do not match the first case's "
                                                          f"inputs {first}")
    if r.reference_has("vjp", "vjp") is False and (r.section("gradients").get("mode") == "none"
                                                   and "vjp" not in r.section("reference")):
        r.bad(("forward_mode",), f"forward mode is compared with the reference's vjp, and "
                                 f"{r.section('reference')['module']} has none")


def _rules_second_order(r: _Rules):
    spec = r.data.get("second_order")
    if spec is None:
        return
    spec = _map(spec)
    fn = spec.get("reference")
    names, _ = r.reference_names()
    if isinstance(fn, str) and names is not None and fn not in names:
        r.bad(("second_order", "reference"), f"{r.section('reference')['module']} has no function {fn!r}")
    chosen = _seq(spec.get("cases"))
    for i, name in enumerate(chosen):
        if isinstance(name, str) and name not in r.case_names:
            r.bad(("second_order", "cases", i), f"{name!r} names no case (cases: {', '.join(r.case_names)})")
    wrt = _seq(r.section("gradients").get("wrt")) if "wrt" in r.section("gradients") else None
    try:
        some = any(_differentiated(wrt, [(n, _str(i["dtype"]), i.get("differentiable", True))
                                         for n, i in _map(c.get("inputs")).items()], ())[1]
                   for c in r.cases if not chosen or c.get("name") in chosen)
    except (KeyError, AttributeError, TypeError):  # a malformed input: reported by the schema
        return
    if not some:
        r.bad(("second_order",), "no case it names has a differentiable input to take second derivatives for")


def _rules_batching(r: _Rules):
    for i, name in enumerate(_seq(_map(r.data.get("batching")).get("cases"))):
        if isinstance(name, str) and name not in r.case_names:
            r.bad(("batching", "cases", i), f"{name!r} names no case (cases: {', '.join(r.case_names)})")


# Every top-level key of the schema, and its rules beyond the schema (tests hold the two to each other).
SECTION_RULES = {
    "name": _schema_only,
    "kind": _schema_only,
    "description": _schema_only,
    "source": _schema_only,
    "constructor": _schema_only,  # its names are checked where they are used (shapes, args, rates)
    "cases": _rules_cases,
    "state": _rules_state,
    "reference": _rules_reference,
    "gradients": _rules_gradients,
    "native": _rules_native,
    "native_gradients": _rules_native_gradients,
    "composition": _rules_composition,
    "tolerances": _rules_tolerances,
    "checks": _schema_only,
    "frameworks": _schema_only,
    "timeout": _rules_timeout,
    "output_dtype": _schema_only,
    "dtypes": _rules_dtypes,
    "accumulate": _rules_accumulate,
    "properties": _rules_properties,
    "modes": _rules_modes,
    "strict_loading": _rules_strict_loading,
    "forward_mode": _rules_forward_mode,
    "second_order": _rules_second_order,
    "compiled": _schema_only,
    "export": _schema_only,
    "mixed_precision": _schema_only,
    "batching": _rules_batching,
    "construction": _schema_only,
    "aliasing": _schema_only,
    "abstract": _schema_only,
    "layout": _schema_only,
}


def _semantic_problems(data: dict, lines: dict, max_input_elements: int, budget=None, reference_names=None) -> list:
    """Every section's rules, all problems at once; ``budget`` (an ElementBudget): the drawn elements' bounds."""
    r = _Rules(data, lines, max_input_elements, reference_names)
    for rules in SECTION_RULES.values():
        rules(r)
    if budget is not None:
        budget.pending = r.drawn_elements
    if budget is not None and not r.oversized and not r.problems:
        why = budget.problem(r.drawn_elements)
        if why:
            r.bad(("cases",), why)
    return r.problems


_found: dict[str, bool] = {}  # find_spec per top-level name, once per process: it walks sys.path


def _findable(top: str) -> bool:
    if top not in _found:
        try:
            _found[top] = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            _found[top] = False
    return _found[top]


# --- loading -----------------------------------------------------------------

def input_element_limit(value=None) -> int:
    """The per-input element limit: ``value`` if given, else the environment's, else the default."""
    if value is None:
        raw = os.environ.get(MAX_INPUT_ELEMENTS_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_INPUT_ELEMENTS
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{MAX_INPUT_ELEMENTS_ENV}={raw!r}: expected a positive whole number of elements") from None
    if not _is_int(value) or value < 1:
        raise ValueError(f"max input elements {value!r}: expected a positive whole number of elements")
    return value


def _element_limit(value, env: str, default: int, what: str) -> int:
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{env}={raw!r}: expected a positive whole number of elements") from None
    if not _is_int(value) or value < 1:
        raise ValueError(f"max {what} elements {value!r}: expected a positive whole number of elements")
    return value


class ElementBudget:
    """The bounds on drawn elements beyond each input's: per contract (every drawn input of it, summed) and per
    run (every contract's sum, summed; ``used`` so far). A contract over either is a contract error, said before
    anything of it is drawn. ``None`` limits: the environment's, else the defaults that follow the per-input
    limit (CONTRACT_ELEMENTS_PER_INPUT, RUN_ELEMENTS_PER_INPUT times it)."""

    def __init__(self, contract_limit=None, run_limit=None, max_input_elements=None):
        per_input = input_element_limit(max_input_elements)
        self.contract_limit = _element_limit(contract_limit, MAX_CONTRACT_ELEMENTS_ENV,
                                             CONTRACT_ELEMENTS_PER_INPUT * per_input, "contract")
        self.run_limit = _element_limit(run_limit, MAX_RUN_ELEMENTS_ENV, RUN_ELEMENTS_PER_INPUT * per_input, "run")
        self.used = 0
        self.pending = 0          # the elements of the contract being loaded
        self.counted: dict = {}   # resolved path -> its elements (a contract loaded again is not counted twice)

    def problem(self, elements: int) -> str | None:
        if elements > self.contract_limit:
            return (f"the contract's drawn inputs (every case's, the properties' and the training mode's) total "
                    f"{elements} elements, more than the {self.contract_limit} allowed per contract "
                    f"(--max-contract-elements or {MAX_CONTRACT_ELEMENTS_ENV} raises it)")
        if self.used + elements > self.run_limit:
            return (f"the contract's drawn inputs total {elements} elements, and with the run's other contracts' "
                    f"{self.used} that is more than the {self.run_limit} allowed per run "
                    f"(--max-run-elements or {MAX_RUN_ELEMENTS_ENV} raises it)")
        return None


ReferenceNames = Callable[[str, "float | None"], "tuple[list[str], str | None]"]


def load_contract(path, max_input_elements: int | None = None, budget: ElementBudget | None = None,
                  raw: bytes | None = None, reference_names: ReferenceNames | None = None) -> Contract:
    """Read, validate and return the contract at ``path``; raise ContractError listing every problem.

    ``max_input_elements`` caps the elements of each drawn input (default: ``input_element_limit()``);
    ``budget`` the elements of all of them (default: the per-contract limit alone; a run passes its own, which
    counts the run's contracts). ``raw``: the file's bytes as read before (the judge reads every contract
    before any user code runs, and uses what it read then).

    Loading runs no code: the reference module is neither imported nor called here. ``reference_names(module,
    timeout)`` -> (names, why not importable) lets the rules that ask what the reference defines (its forward,
    vjp, init_<slot>, second_order's function) be said with the others; without it they are not looked at. A
    run loads its contracts with ``reference_check.load_checked``, which passes the reference executor's and
    then checks the reference against itself.
    """
    limit = input_element_limit(max_input_elements)
    if budget is None:
        budget = ElementBudget(max_input_elements=limit, run_limit=2 ** 62)
    path = Path(path)
    if raw is None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ContractError(path, [(None, "(file)", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ContractError(path, [(line, "(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    try:
        data, lines, problems, replaced = _load_with_lines(text)
    except _Structure as exc:
        raise ContractError(path, exc.problems) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else (text[:getattr(exc, "position", 0)].count("\n") + 1
                                           if isinstance(getattr(exc, "position", None), int) else None)
        msg = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        context = getattr(exc, "context", None)
        raise ContractError(path, [(line, "(yaml)", _short(f"malformed YAML: {msg}"
                                                          + (f" ({context})" if context else "")))]) from None
    except RecursionError:
        raise ContractError(path, [(None, "(yaml)", "nested too deeply to read")]) from None
    if data is None:
        raise ContractError(path, [(1, "(file)", "the contract is empty (a mapping with name, kind, "
                                    "reference and cases is expected)")])
    if not isinstance(data, dict):
        raise ContractError(path, [(1, "(top level)", f"a contract must be a mapping, not a {type(data).__name__}")])

    found = [p for err in _validator().iter_errors(data) for p in _schema_problems(err, lines)]
    key = str(path.resolve())
    if key in budget.counted:   # loaded again (a second collection of the file): counted once
        budget.used -= budget.counted.pop(key)
    found += _semantic_problems(data, lines, limit, budget, reference_names)
    # a value the reader replaced has been reported already; what follows from the stand-in is noise
    problems += [p for p in found if not any(p[1] == f or p[1].startswith((f + ".", f + "[")) for f in replaced)]
    problems = list(dict.fromkeys(problems))
    if problems:
        raise ContractError(path, problems)
    contract = Contract(data=data, path=str(path), lines=lines, digest=hashlib.sha256(raw).hexdigest())
    budget.counted[key] = contract.drawn_elements = budget.pending
    budget.used += budget.counted[key]
    return contract


def bundled_contracts() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS_DIR.glob("*.yaml"))}


def find_contract(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.exists():
        return p
    if p.suffix in (".yaml", ".yml") or "/" in str(name_or_path) or "\\" in str(name_or_path):
        raise ContractNotFound(name_or_path, [(None, "(file)", (
            f"no such contract file ({p.resolve()} does not exist; a relative path is read from the current "
            f"directory); or give a bundled contract's name: {', '.join(bundled_contracts()) or 'none installed'}"))])
    bundled = bundled_contracts()
    if name_or_path in bundled:
        return bundled[name_or_path]
    if bundled:
        known = f"the bundled contracts are {', '.join(bundled)}"
    else:  # an installation without its package data
        known = f"this installation has no bundled contracts (none in {SPECS_DIR}): reinstall layer-conformance"
    raise ContractNotFound(name_or_path, [(None, "(name)", (
        f"no bundled contract named {name_or_path!r}; {known}. Give one of those names, or the path to a "
        "contract of your own (a YAML file, e.g. --contract path/to/mylayer.yaml; see the README's "
        "Contracts section for its keys)"))])
