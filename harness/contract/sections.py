"""The contract's sections, one frozen dataclass each; their defaults are written once, on their fields."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .reading import _floating


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
    """reference: the numpy module that defines the expected values, and its functions' names; or ``impl``, a
    trusted layer or function (``module:attr``) in ``framework``, run as a layer is, with its own ``state_map``.
    ``framework: numpy`` names a numpy module's forward function: the module form (its ``vjp`` beside it)."""
    module: str | None = None
    forward: str = "forward"
    vjp: str = "vjp"
    impl: str | None = None
    framework: str | None = None
    state_map: tuple = ()
    _convert = {"state_map": tuple}

    def __post_init__(self):
        if self.impl and self.framework == "numpy":  # a numpy function: the module form, through its executor
            module, _, forward = self.impl.partition(":")
            for key, value in (("module", module), ("forward", forward), ("impl", None), ("framework", None)):
                object.__setattr__(self, key, value)

    @property
    def label(self) -> str:
        """How messages name the reference: ``other:Original (torch)``, or its module."""
        return f"{self.impl} ({self.framework})" if self.impl else str(self.module)


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
class NativeCall(_Section):
    """native.<framework>.call: how the native layer is called where the case's inputs alone do not say it
    (Keras' MultiHeadAttention takes the sequence twice and is causal only through a keyword)."""
    inputs: tuple[str, ...] | None = None  # case input names in the native's positional order; None: the case's
    kwargs: Mapping = _no_mapping()        # literal keyword arguments ($name: the contract's argument)
    _convert = {"inputs": tuple, "kwargs": _ro}

    def arguments(self, names, arrays) -> list:
        """The native's positional arguments from one case's inputs (``names`` in the case's order)."""
        if self.inputs is None:
            return list(arrays)
        by_name = dict(zip(names, arrays))
        return [by_name[n] for n in self.inputs]


@dataclass(frozen=True)
class Native(_Section):
    """native.<framework>: the framework's own layer (a class), function, or why it has none."""
    class_path: str | None = None  # module.Class
    args: Mapping = _no_mapping()  # its constructor's ($name: the contract's argument)
    state: Mapping = _no_mapping()  # contract slot -> the native layer's name for it
    call: NativeCall = field(default_factory=NativeCall)  # how it is called (default: the case's inputs)
    function: str | None = None    # module.function
    none: str | None = None        # why the framework has none
    _convert = {"args": _ro, "state": _ro, "call": NativeCall.of}
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
    # values and gradients below float64, where no entry is declared: the layer's error may be this many times the
    # reference's own error in that dtype (layer_conformance.tolerances.reference_error_factor); 0: the tables alone
    reference_error_factor: float = 2.0
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
    init: Any                # a value rule: ones | zeros | reference | {linspace: [lo, hi]} | random | {random: {...}}
    test_value: Any = None   # the values check's state; None: the initial value
    description: str | None = None
    _convert = {"shape": tuple}

    @property
    def random(self) -> "RandomInit | None":
        """``init: random`` (or ``{random: {mean, std, finite}}``): the layer draws its own initial values; None
        for every other rule."""
        if self.init == "random":
            return RandomInit()
        if isinstance(self.init, Mapping) and "random" in self.init:
            return RandomInit.of(self.init["random"])
        return None


@dataclass(frozen=True)
class RandomInit(_Section):
    """state.<kind>.<slot>.init.random: the bounds a layer's own random initial values keep."""
    mean: float | None = None   # the values' expected mean; None: not checked
    std: float | None = None    # their expected standard deviation; None: not checked
    finite: bool = True         # every value finite


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


