"""What the schema cannot say: one validator per top-level section (``SECTION_RULES``), all problems at once."""
from __future__ import annotations

import importlib.util
import math

from .model import _differentiated, default_dtype_of
from .problems import MAX_ELEMENTS, MAX_INPUT_ELEMENTS_ENV, _field_name, _line_for, _short
from .reading import _floating, _is_int, _is_number, _map, _seq, _str

# --- section rules -----------------------------------------------------------
# What the schema cannot say, one validator per top-level section (SECTION_RULES). They run even
# when the schema pass found problems (so that every problem is listed at once), hence they trust
# no type: every access goes through _map / _seq. A rule that can be decided from the contract alone
# lives here, never in a check.


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
                    for key in ("mean", "std"):
                        r.finite(_map(rule.get("random")).get(key), at + (rule_key, "random", key))
            names, _ = r.reference_names()
            module = r.section("reference").get("module")
            if slot.get("init") == "reference" and names is not None and f"init_{name}" not in names:
                r.bad(at + ("init",), f"init: reference needs a function init_{name} in {module}")
    if r.data.get("kind") == "function" and r.slots:
        r.bad(("state",), "a function contract has no state; declare kind: layer")


def _rules_reference(r: _Rules):
    ref = r.section("reference")
    if "impl" in ref:
        _rules_impl_reference(r, ref)
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


def _rules_impl_reference(r: _Rules, ref: dict):
    """``reference: {impl}``: its state map readable and naming the contract's slots; nothing asked of a numpy module
    (a slot's ``init: reference``, ``second_order.reference``)."""
    for i, entry in enumerate(_seq(ref.get("state_map"))):
        slot, eq, name = str(entry).partition("=")
        if not eq:
            r.bad(("reference", "state_map", i), f"{entry!r}: expected SLOT=NAME, e.g. w=lin.weight|T")
        elif slot.strip() not in r.slots:
            r.bad(("reference", "state_map", i), f"{slot.strip()!r} is not a state slot of this contract")
        elif (why := _state_map_problem(name)) is not None:
            r.bad(("reference", "state_map", i), why)
    for kind in ("trainable", "non_trainable"):
        for name, slot in _map(_map(r.data.get("state")).get(kind)).items():
            if _map(slot).get("init") == "reference":
                r.bad(("state", kind, name, "init"), "init: reference needs a numpy reference module; with "
                                                    "`reference: {impl}` use init: random (the layer's own values)")
    if _map(r.data.get("second_order")).get("reference"):
        r.bad(("second_order", "reference"), "a Hessian-vector product needs a numpy reference module, not "
                                             "`reference: {impl}`")


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
    from ..frameworks import FRAMEWORKS, installed  # no framework import: find_spec only
    for fw, nat in r.section("native").items():
        nat = _map(nat)
        if isinstance(nat.get("function"), str) and r.data.get("kind") == "layer":
            r.bad(("native", fw, "function"), f"native {nat['function']!r} is a function but the contract is "
                                              "a layer; name a class instead")
        for key, v in _map(nat.get("args")).items():
            if isinstance(v, str) and v.startswith("$") and v[1:] not in r.ctor:
                r.bad(("native", fw, "args", key), f"{v!r} names no constructor argument")
        _rules_native_call(r, fw, _map(nat.get("call")))
        for slot, entry in _map(nat.get("state")).items():
            if slot not in r.slots:
                r.bad(("native", fw, "state", slot), f"{slot!r} is not a state slot of this contract")
            elif (why := _state_map_problem(entry)) is not None:
                r.bad(("native", fw, "state", slot), why)
        cls = nat.get("class")
        if isinstance(cls, str):
            top, dot, _ = cls.partition(".")
            if not dot:
                r.bad(("native", fw, "class"), f"{cls!r} is not a dotted module.Class path")
            elif fw in FRAMEWORKS and installed(fw) and not _findable(top):
                r.bad(("native", fw, "class"), f"{cls!r}: no module {top!r} here, although {fw} is installed")


# the adapters pass these to every call themselves (a layer's mode)
_HARNESS_KWARGS = ("training",)


def _rules_native_call(r: _Rules, fw, call: dict):
    """native.<fw>.call: the inputs it names are every case's, its keywords plain data the adapter does not pass
    itself; a $name a constructor argument."""
    for i, name in enumerate(_seq(call.get("inputs"))):
        if not isinstance(name, str):
            continue
        lacking = [c["name"] for c in r.cases if isinstance(c.get("name"), str) and name not in _map(c.get("inputs"))]
        if name not in r.case_inputs:
            r.bad(("native", fw, "call", "inputs", i),
                  f"{name!r} is no case input (inputs: {', '.join(r.case_inputs) or 'none'})")
        elif lacking:
            r.bad(("native", fw, "call", "inputs", i), f"{name!r} is not an input of case(s) {', '.join(lacking)}")
    for key, v in _map(call.get("kwargs")).items():
        at = ("native", fw, "call", "kwargs", key)
        if key in _HARNESS_KWARGS:
            r.bad(at, f"{key!r} is passed by the harness itself (the mode each check runs in); leave it out")
        elif isinstance(v, str) and v.startswith("$") and v[1:] not in r.ctor:
            r.bad(at, f"{v!r} names no constructor argument")
        elif isinstance(v, list) and not _plain(v):
            r.bad(at, f"{_short(repr(v))} is not plain data: a keyword's value is a number, string, boolean, null "
                      "or a (nested) list of them")


def _plain(v) -> bool:
    if isinstance(v, list):
        return all(_plain(e) for e in v)
    return v is None or isinstance(v, (bool, int, float, str))


def _state_map_problem(entry) -> str | None:
    """Why a state map entry (``name`` or ``name|T|reshape(8,8)``, layer_conformance.state_map) cannot be read."""
    from ..state_map import StateMapError, parse
    try:
        parse(str(entry))
    except StateMapError as exc:
        return str(exc)
    return None


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
    r.finite(tol.get("reference_error_factor"), ("tolerances", "reference_error_factor"))


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


