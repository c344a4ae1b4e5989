"""The files ``python -m layer_conformance new`` writes: the contract's YAML and the numpy reference stub, as text,
from what ``scaffold.observe`` saw of the layer (plain data: no executor, no framework)."""
from __future__ import annotations

import json
import keyword

from .check_catalog import CATALOG
from .dtypes import HALF



def _dense_layout(framework: str) -> str:
    from .frameworks import FRAMEWORKS
    entry = FRAMEWORKS.get(framework)
    return entry.dense_layout if entry is not None and entry.dense_layout else "as the framework stores it"


def _flow(value) -> str:
    """A value in YAML flow style (JSON is YAML; strings quoted only where needed)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and value.replace("_", "").replace(".", "").isalnum() and value[:1].isalpha() \
            and value.lower() not in ("true", "false", "null", "yes", "no", "on", "off", "y", "n"):
        return value
    if isinstance(value, float):  # YAML 1.1 reads 6e-05 as a string: the mantissa keeps its point (6.0e-05)
        mantissa, e, exponent = repr(value).partition("e")
        return (mantissa if "." in mantissa or mantissa in ("inf", "-inf", "nan") else mantissa + ".0") + e + exponent
    return json.dumps(value)


def named_dims(shape, constructor: dict, skip: int = 0) -> list:
    """``shape`` with each dimension (after the first ``skip``) that equals exactly one integer constructor argument
    written as that argument's name: the contract then follows the constructor."""
    ints = {k: v for k, v in constructor.items() if type(v) is int}
    out = []
    for i, n in enumerate(shape):
        names = [k for k, v in ints.items() if v == n]
        out.append(names[0] if i >= skip and len(names) == 1 else n)
    return out


def _input(shape, dtype, constructor, **draw) -> dict:
    if dtype not in ("float16", "bfloat16", "float32", "float64"):
        draw = {"draw": "zeros"}  # an integer or bool input: how to draw it is the contract's author's to say
    return {"shape": named_dims(shape, constructor, skip=1), "dtype": dtype, **draw}


SCALED = "scaled"  # the case whose 16-bit sums are the dtype's rounding more than the layer's: 32 and 64 bits only
CASES = (
    ("random", None, {"draw": "normal"}),
    (SCALED, "inputs ten times larger: a layer that mishandles scale (an overflow, a wrong eps) shows here",
     {"draw": "normal", "scale": 10.0}),
    ("zeros", "an input of zeros: the edge where a division or a normalisation breaks first", {"draw": "zeros"}),
)


def contract_yaml(name: str, impl: str, seen, constructor: dict, inputs: dict, reference: dict) -> str:
    """The contract's text. ``seen``: scaffold.Observed; ``inputs``: {name: (shape, dtype)}; ``reference``: the
    contract's ``reference`` mapping."""
    lines = [f"# Drafted by `python -m layer_conformance new --impl {impl}` from one build and one forward pass of",
             f"# the layer ({seen.framework}). Review it: the state, the dtypes and the gradients are what the layer does",
             "# now, not what it should do (docs/contracts.md lists every key).",
             f"name: {name}", "kind: layer",
             f"description: {_flow(f'{impl}: say what it computes')}"]
    if constructor:
        lines.append(f"constructor: {_flow(constructor)}")
    if len(seen.dtypes) > 1:
        lines.append(f"dtypes: {_flow(seen.dtypes)}   # the floating dtypes its forward runs in, with finite values")
    for dtype, why in seen.refused.items():
        lines.append(f"#   not {dtype}: {why}")
    lines.append("cases:")
    for case, description, draw in CASES:
        lines.append(f"  - name: {case}")
        if description:
            lines.append(f"    description: {_flow(description)}")
        wide = [d for d in seen.dtypes if d in ("float32", "float64")]
        if case == SCALED and wide and len(wide) < len(seen.dtypes):
            lines.append(f"    dtypes: {_flow(wide)}   # 16-bit sums of terms this large round by more than the "
                         f"layer's own error")
        lines.append("    inputs:")
        for arg, (shape, dtype) in inputs.items():
            lines.append(f"      {arg}: {_flow(_input(shape, dtype, constructor, **draw))}")
    lines += _state(seen, constructor)
    lines.append(f"reference: {_flow(reference)}")
    wrt = seen.grad_inputs + seen.grad_slots
    if wrt:
        lines += ["gradients:", '  mode: "true"', f"  wrt: {_flow(wrt)}"]
    else:
        lines += ["gradients:", "  mode: none   # no input or trainable slot got a gradient"]
    return "\n".join(lines + _tolerances(seen, "module" in reference)) + "\n"


# the checks that compare the layer with itself by a tolerance of their own id and never fall back to the
# reference-error rule (CheckSpec.own_tolerance): where the rule judges values and gradients, a measured gap goes to these
OWN_TOLERANCE = tuple(spec.id for spec in CATALOG if spec.own_tolerance)


def _tolerances(seen, rule: bool) -> list:
    """The atols the layer's own rounding asks for (scaffold._gaps), where the default table's are smaller. A stated
    tolerance turns the reference-error rule off for its check and dtype, so where the rule applies (``rule``: a numpy
    reference; values and gradients in float32 and 16 bits) values and gradients get none and each check of
    OWN_TOLERANCE gets the larger gap; elsewhere (float64, or an implementation reference) ``default`` takes it in 32
    and 64 bits (compiled, batching and the others compare sums taken in another order too), and 16 bits get one
    per comparison, whose default tables differ."""
    from .tolerances import REFERENCE_ERROR_DTYPES, default
    if not seen.gaps:
        return []

    def ruled(dtype):
        return rule and dtype in REFERENCE_ERROR_DTYPES
    wide: dict = {}
    for (check, dtype), atol in sorted(seen.gaps.items()):
        if dtype not in HALF:
            wide[dtype] = max(atol, wide.get(dtype, 0.0))
    per_check: dict = {}
    for dtype, atol in wide.items():
        for check in OWN_TOLERANCE if ruled(dtype) else ():
            per_check.setdefault(check, {})[dtype] = {"rtol": default(check, dtype)[0], "atol": atol}
    for (check, dtype), atol in sorted(seen.gaps.items()):
        if dtype in HALF and not ruled(dtype):
            per_check.setdefault(check, {})[dtype] = {"rtol": default(check, dtype)[0], "atol": atol}
    unruled = {d: {"rtol": default("values", d)[0], "atol": a} for d, a in wide.items() if not ruled(d)}
    if not unruled and not per_check:
        return []
    lines = ["tolerances:",
             "  # measured, not derived: the layer's own run in each dtype against its float64 run (state and inputs",
             "  # rounded alike), three draws as each case draws, eight times the largest gap beyond the default",
             "  # rtol, where the default table's atol is smaller. Review them: they allow what the layer does now."]
    if rule:
        lines += ["  # values and gradients in float32 and 16 bits state none: where the table fails, they are judged",
                  "  # against twice the numpy reference's own error in the dtype (docs/contracts.md), which a stated",
                  "  # tolerance would turn off; the checks below compare the layer with itself, outside that rule."]
    if unruled:
        lines += ["  default:"] + [f"    {dtype}: {_flow(entry)}" for dtype, entry in unruled.items()]
    if per_check:
        lines.append("  checks:")
    for check, entries in per_check.items():
        lines.append(f"    {check}: {_flow(entries)}")
    return lines


def _state(seen, constructor: dict) -> list:
    lines = []
    for key, trainable in (("trainable", True), ("non_trainable", False)):
        slots = [s for s in seen.slots if s.trainable is trainable]
        if not slots:
            continue
        lines += ["state:"] if not lines else []
        lines.append(f"  {key}:")
        for s in slots:
            init = s.init if s.finite else {"random": {"finite": False}}
            spec = {"shape": named_dims(s.shape, constructor), "dtype": s.dtype, "init": init}
            lines.append(f"    {s.name}: {_flow(spec)}   # the layer's {s.path}")
    return lines


def _signature(args: list, slots: list, constructor: dict, first: str | None = None) -> str:
    kw = list(dict.fromkeys(slots + list(constructor)))
    if any(keyword.iskeyword(n) for n in args + kw):
        return ", ".join(([first] if first else []) + ["*args", "**kw"])
    return ", ".join(([first] if first else []) + args + (["*"] + kw if kw else []) + ["**_"])


def stub_module(name: str, impl: str, stub: str, seen, constructor: dict, inputs: dict) -> str:
    """The numpy reference stub: forward and vjp (and init_<slot> for a slot whose start the layer does not draw at
    random), each raising NotImplementedError("fill in: ...") that names this file until it is written."""
    args = list(inputs)
    slots = [s.name for s in seen.slots]
    described = [f"    {a}: input, shape {list(s)} ({_flow(named_dims(s, constructor, 1))} in the cases), float64"
                 for a, (s, _) in inputs.items()]
    described += [f"    {s.name}: {'trainable' if s.trainable else 'non-trainable'} slot, the layer's `{s.path}`, "
                  f"shape {list(s.shape)} ({_flow(named_dims(s.shape, constructor))}), float64" for s in seen.slots]
    described += [f"    {k}: the constructor's argument ({_flow(v)} in the contract)" for k, v in constructor.items()]
    grads = seen.grad_inputs + seen.grad_slots
    then = f", then vjp(g, {', '.join(args)}, ...)," if grads else ""
    out = [f'"""The numpy reference of the `{name}` contract, drafted by `python -m layer_conformance new` from',
           f"{impl} ({seen.framework}): the expected values every check compares the layer with.",
           "", "Fill in what raises NotImplementedError. Each function receives float64 numpy arrays: the inputs by",
           "position, then the state slots and the constructor's arguments by keyword:", "", *described, "",
           f"The state arrives as the layer holds it ({_dense_layout(seen.framework)}).",
           '"""', "import numpy as np", "", f"STUB = {stub!r}", "", "",
           f"def forward({_signature(args, slots, constructor)}):",
           f'    """The layer\'s output in float64: shape {list(seen.output_shape)} for the drawn input."""',
           f'    raise NotImplementedError(f"fill in: forward({", ".join(args)}, ...){then} in {{STUB}}: the '
           f'layer\'s output, computed in numpy (its docstring and the module\'s say what it receives)")']
    if grads:
        returns = ", ".join(f'"{g}": ...' for g in grads)
        out += ["", "", f"def vjp({_signature(args, slots, constructor, first='g')}):",
                '    """The gradients of sum(forward(...) * g) (g: the output\'s cotangent, the output\'s shape) as',
                f"    {{{returns}}}: each float64, shaped like its argument (checked against finite differences of",
                '    forward when the contract loads)."""',
                f'    raise NotImplementedError(f"fill in: vjp(g, {", ".join(args)}, ...) in {{STUB}}: the gradients '
                f'{", ".join(grads)} of sum(forward(...) * g)")']
    for s in (s for s in seen.slots if s.init == "reference"):
        out += ["", "", f"def init_{s.name}(**_):",
                f'    """The initial value of `{s.name}` (the layer\'s `{s.path}`), shape {list(s.shape)}."""',
                f'    raise NotImplementedError(f"fill in: init_{s.name}() in {{STUB}}: the slot\'s initial value")']
    return "\n".join(out) + "\n"
