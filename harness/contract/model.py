"""The Contract object: a loaded contract, read through one typed accessor per section."""
from __future__ import annotations

from dataclasses import dataclass, field

from .problems import _field_name, _line_for, _short
from .reading import _floating, _map
from .sections import (Abstract, Aliasing, Batching, Case, Compiled, Composition, Construction,
                       Export, ForwardMode, Gradients, Layout, MixedPrecision, Modes, Native, Property, Reference,
                       SecondOrder, Slot, StrictLoading, Tolerances)


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


