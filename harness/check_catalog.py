"""The one declaration of each check. Every table of checks is derived from ``CATALOG``.

A check's id is part of the public interface (test ids, results files, expectations, a contract's
``checks:`` and ``tolerances.checks``). The order of ``CATALOG`` is the order a run collects and
reports the checks in. Importing this module imports nothing (no check, no numpy), so that the contract
loader, which the plugin imports at pytest's start, can fill the schema from it.

Derived from it: the tables at the end of this module; ``CHECKS`` (id -> function) in
``layer_conformance.checks``; the contract schema's ``$defs.check_id`` (filled in when it is loaded); which checks
a contract makes n/a (``contract_na``, read by ``checks.applicable.contract_says``) and the n/a of a framework
whose adapter lacks a protocol method a check needs (``needs``, ``checks.applicable.adapter_lacks``).
Tested against it: docs/checks.md's table of checks and the checks the hints of ``mistakes.py`` name
(tests/meta_tests/test_check_declarations.py); that no other file names a check, and that its needs cover the
protocol methods it calls (tests/meta_tests/test_adding_counts.py).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class CheckSpec:
    id: str
    module: str  # the module for its area, ``harness/checks/<module>.py``, which defines ``check_<id>(ctx)``
    # why a run includes it only when named (--check ID); "" for a check every run includes
    opt_in: str = ""
    # it compares values or gradients, so it runs once per dtype a contract's ``dtypes`` lists (a target of its
    # own, ``rmsnorm[torch-cpu-bfloat16]``); the others are about registration, state, saving and devices, which
    # a dtype does not change, and run once, in the cases' own dtype
    per_dtype: bool = False
    # it loads a layer in a fresh process (``CheckContext.fresh_adapter``): a run that includes one starts each
    # framework's zygote, the process fresh executors are forked from, with its other executors
    fresh_process: bool = False
    # in a run of one process (-n 0) it runs on a second lane of layer executors, on a thread beside the
    # others (layer_conformance.lane)
    alongside: bool = False
    # what its verdict rests on, tried in this order where it fails itself: a failure there blocks it
    # (``checks/blame.py``)
    prerequisites: tuple[str, ...] = ()
    # where it is another check's prerequisite: what its failure says of the layer, in that check's message
    blocks_because: str = ""
    # it runs in the cuda column too; the others run in the cpu column only, the cuda column being about
    # movement to the GPU and parity with cpu
    device_column: bool = False
    # it compares derivatives, so the gradients' tolerance table judges it (``tolerances.GRADIENTS``); the
    # others are judged by the values' table
    gradient_tolerances: bool = False
    # where the contract states no tolerance for it in a dtype below float64, a comparison with the float64
    # reference that fails the table may be within k times the reference's own error in that dtype
    # (``tolerances.reference_error_factor``)
    reference_error: bool = False
    # it compares the layer with another run of itself (compiled, batched, in another mode or on another device), by
    # a tolerance of its own id and never by the rule above: ``new`` gives it the layer's measured gap
    own_tolerance: bool = False
    # the closed list of reasons (``NA_REASONS``' codes) for which it may come to n/a beyond the contract's keys,
    # which every check accepts; an n/a for any other reason is a failure of the check
    not_applicable: tuple[str, ...] = ()
    # the protocol methods (``layer_conformance.protocol``) it calls beyond what every check uses through
    # ``CheckContext`` (core's building, calling and state): where a framework's adapter lacks one (its executor's
    # hello does not list it), the check is n/a for that framework ("not_in_adapter"), said before it runs
    # (``checks.applicable.adapter_lacks``)
    needs: tuple[str, ...] = ()
    # why the contract alone makes it n/a in a framework: ``(contract, framework) -> reason or None`` (None: it can
    # run), decided before any framework is imported (``checks.applicable``); None: the contract never does
    contract_na: Callable | None = None

    @property
    def function(self) -> Callable:
        """``check_<id>`` of its module (imported on first use)."""
        return getattr(importlib.import_module(f"{__package__}.checks.{self.module}"), f"check_{self.id}")


@dataclass(frozen=True)
class NaReason:
    """One reason a check may come to n/a, and who it rests on (``record.NA_SOURCES``)."""
    code: str
    source: str        # "contract" | "framework" | "layer"
    means: str
    # source "framework": the frameworks the judge knows it of; the same claim from another framework's executor
    # is a failure
    frameworks: tuple[str, ...] = ()


_MX = ("mxnet",)
NA_REASONS: dict[str, NaReason] = {r.code: r for r in (
    NaReason("contract", "contract", "a key of the contract says so (frameworks.<fw>.not_applicable, a section's "
                                     "not_applicable, a layer or function contract without the mechanism)"),
    NaReason("contract_cases", "contract", "the contract's cases or sections give the check nothing to compare "
                                           "(no two alike differentiable inputs, no batch axis, no format here)"),
    NaReason("immutable_arrays", "framework", "the framework's arrays are immutable: a layer cannot write its "
                                              "input", ("jax", "tensorflow")),
    NaReason("no_strides", "framework", "the framework's arrays have no memory layout a layer can see",
             ("jax", "tensorflow", "mxnet")),
    NaReason("no_format", "framework", "the framework has no such saving format",
             ("torch", "tensorflow", "jax", "mxnet")),
    NaReason("no_forward_mode", "framework", "MXNet 1.9.1 has no forward-mode differentiation", _MX),
    NaReason("no_double_backward", "framework", "MXNet 1.9.1 cannot differentiate twice through its Functions", _MX),
    NaReason("no_vmap", "framework", "MXNet 1.9.1 has no vectorising transform", _MX),
    NaReason("no_dtype", "framework", "MXNet 1.9.1 has no bfloat16 for Gluon layers", _MX),
    NaReason("imperative_function", "framework", "an MXNet autograd.Function runs imperatively only: no graph to "
                                                 "hybridize, save or infer shapes from", _MX),
    NaReason("function_alias_gradient", "framework", "an MXNet autograd.Function gives no gradient to one array "
                                                     "passed twice", _MX),
    # the judge's own finding from the executor's hello, before the check runs (``CheckSpec.needs``); no executor
    # may claim it (no framework lists it)
    NaReason("not_in_adapter", "framework", "the framework's adapter does not implement a protocol method the "
                                            "check needs"),
    # said by the layer's own process, about the layer: a claim, listed by the gate and failed by --strict-na
    NaReason("custom_function_no_vmap", "layer", "a custom torch.autograd.Function without a vmap rule"),
    NaReason("not_a_module", "layer", "the constructor makes no module of the framework's kind"),
    NaReason("no_state", "layer", "the module holds no state"),
    NaReason("lazy_module", "layer", "a lazy module: its state takes its shape from the first call"),
    NaReason("not_hybrid", "layer", "a gluon Block, not a HybridBlock: no graph to compile, save or infer shapes "
                                    "from"),
    NaReason("untraceable", "layer", "the layer cannot be traced with abstract inputs (a custom Function, a "
                                     "data-dependent shape)"),
    NaReason("no_cast", "layer", "the layer cannot be cast to the dtype"),
    NaReason("no_kernel", "layer", "the framework has no kernel for what the layer computes in this dtype on this "
                                   "machine"),
    NaReason("no_precision_policy", "layer", "the layer takes no mixed-precision policy (a function, or a "
                                             "constructor without dtype arguments)"),
    NaReason("no_gradient", "layer", "the layer's normal call gives the inputs no gradient"),
    NaReason("parts", "layer", "every part of the check is n/a, for the reasons its message lists"),
)}

# the reasons a check that builds the layer in a contract's dtype may meet there
_IN_DTYPE = ("no_cast", "no_dtype", "no_kernel")


def na_source(exc) -> str:
    """Who a ``record.NotApplicable`` rests on: the catalogue's word for its reason (one made of others carries its
    parts' least trusted); "layer" for a reason the catalogue does not know."""
    reason = NA_REASONS.get(exc.code)
    return exc.source or (reason.source if reason is not None else "layer")


def na_of(parts):
    """One ``record.NotApplicable`` for a check whose every part is n/a: the reasons joined, resting on its least
    trusted part."""
    from .record import NA_SOURCES, NotApplicable
    parts = list(parts)
    worst = max((na_source(p) for p in parts), key=NA_SOURCES.index, default="layer")
    codes = {p.code for p in parts}
    return NotApplicable("; ".join(dict.fromkeys(p.reason for p in parts)),
                         code=codes.pop() if len(codes) == 1 else "parts", source=worst)


def na_accepted(check: str, code: str, framework: str) -> str | None:
    """Why an n/a for reason ``code`` on ``check`` in ``framework`` is refused, or None where the catalogue
    accepts it (the contract's keys always are)."""
    reason = NA_REASONS.get(code)
    if reason is None:
        return "it names no reason the harness knows" if code else "it names no reason"
    if reason.source != "contract" and code not in _SPECS[check].not_applicable:
        return f"{code!r} is not a reason {check} can be n/a for"
    if reason.source == "framework" and framework not in reason.frameworks:
        return f"{code!r} is not a limit of {framework}"
    return None


# --- what the contract alone makes n/a (``CheckSpec.contract_na``): read from a contract, importing nothing ---------

def _function(why: str) -> Callable:
    """n/a for a function contract (no layer, state or flag), with ``why``."""
    return lambda c, fw: why if c.kind == "function" else None


def _unless(declared: Callable, why: str, then: Callable | None = None) -> Callable:
    """n/a with ``why`` where ``declared(contract)`` is false; else ``then``'s answer (None: it runs)."""
    return lambda c, fw: why if not declared(c) else (then(c, fw) if then else None)


def _section_says(section: str, prefix: str = "not applicable: ") -> Callable:
    """n/a where the contract's ``section`` is ``{not_applicable: why}``."""
    def said(c, fw):
        why = getattr(c, section).not_applicable
        return f"{prefix}{why}" if why else None
    return said


def _native(c, fw):
    spec = c.native.get(fw)
    if spec is None:
        return f"the contract names no native {fw} layer"
    return f"no native {fw} layer: {spec.none}" if spec.none is not None else None


def _either(*rules: Callable) -> Callable:
    """The first rule's reason."""
    return lambda c, fw: next((why for rule in rules if (why := rule(c, fw))), None)


_NOT_A_LAYER = _function("a function contract is not a layer")
_NO_GRADIENT = _unless(lambda c: c.gradients.declared, "the contract declares no gradient")


# Why these values: the layer must follow the framework's mode switch (``modes``) before its outputs can be
# compared, and its outputs must be right (``values``) before what is derived from them (native parity,
# gradients, forward-mode tangents, cross-device parity, properties of the outputs); second derivatives rest on
# the first (``gradients``). compiled, export and mixed_precision compare evaluation-mode calls of the layer
# (compiled, reloaded, or under a policy) with the eager one; compiled builds its eager twin from the same state,
# which rests on that state making a faithful fresh instance (``serialization``). They do not rest on values or
# gradients (a Python side effect baked into a trace fails values too, and compiled names it); only where their
# failure is the same symptom (a NaN under XLA where the eager outputs are already wrong, the same wrong gradient
# reloaded) is it blocked (checks/blame.py).
# compiled and export are not per dtype: they compare with the same layer run eagerly, in whatever dtype, so a dtype would add nothing but
# their cost; together they take about as long as all the others, which leave a core idle (alongside).
CATALOG: tuple[CheckSpec, ...] = (
    CheckSpec("parameters", "state", needs=("optimizer_view",),
              contract_na=_function("a function contract has no layer state")),
    CheckSpec("buffers", "state", needs=("vjp",),
              contract_na=_either(_function("a function contract has no layer state"),
                                  _unless(lambda c: c.non_trainable, "the contract declares no non-trainable state"))),
    CheckSpec("composition", "registration", needs=("sequential",),
              contract_na=_NOT_A_LAYER),
    CheckSpec("serialization", "registration", needs=("round_trip",), prerequisites=("modes",),
              blocks_because="the layer's state does not make a faithful fresh instance",
              contract_na=_NOT_A_LAYER),
    CheckSpec("devices", "registration", own_tolerance=True, needs=("devices", "move"), device_column=True, prerequisites=("modes",)),
    CheckSpec("device_parity", "registration", own_tolerance=True, needs=("devices", "move", "vjp"), device_column=True,
              prerequisites=("modes", "values"),
              contract_na=_NO_GRADIENT),
    CheckSpec("values", "numerics", per_dtype=True, prerequisites=("modes",), reference_error=True,
              blocks_because="the outputs already differ from the reference",
              not_applicable=_IN_DTYPE),
    CheckSpec("native", "numerics", per_dtype=True, prerequisites=("modes", "values"),
              not_applicable=_IN_DTYPE,
              contract_na=_native),
    CheckSpec("gradients", "numerics", needs=("vjp",), per_dtype=True, gradient_tolerances=True, reference_error=True,
              prerequisites=("modes", "values"), blocks_because="the first derivatives are already wrong",
              not_applicable=_IN_DTYPE,
              contract_na=_NO_GRADIENT),
    CheckSpec("strict_loading", "loading", needs=("export_state", "load_state", "alter_saved"),
              contract_na=_either(_function("a function contract has no saved state"),
                                  _unless(lambda c: c.trainable or c.non_trainable, "the contract declares no state"))),
    CheckSpec("modes", "modes", own_tolerance=True, needs=("nest", "manual_seed"), per_dtype=True,
              blocks_because="the layer does not follow the framework's training/inference switch",
              not_applicable=_IN_DTYPE,
              contract_na=_unless(lambda c: c.modes, "the contract declares no training/evaluation behaviour",
                                  _function("a function contract has no training flag"))),
    CheckSpec("properties", "properties", needs=("nest",), per_dtype=True, prerequisites=("modes", "values"),
              not_applicable=_IN_DTYPE,
              contract_na=_unless(lambda c: c.properties, "the contract states no properties",
                                  _function("properties are stated for layers"))),
    CheckSpec("forward_mode", "forward", own_tolerance=True, needs=("jvp",), per_dtype=True, gradient_tolerances=True,
              prerequisites=("modes", "values"),
              not_applicable=("no_forward_mode", *_IN_DTYPE),
              contract_na=_unless(lambda c: c.forward_mode is not None,
                                  "the contract does not ask for forward mode")),
    CheckSpec("second_order", "second_order", own_tolerance=True, needs=("hvp",), per_dtype=True, gradient_tolerances=True,
              prerequisites=("modes", "values", "gradients"),
              not_applicable=("no_double_backward", *_IN_DTYPE),
              contract_na=_unless(lambda c: c.second_order is not None,
                                  "the contract does not ask for second-order derivatives")),
    # compares the layer with itself (examples alone, permuted, one changed, vectorised), not with the reference,
    # so wrong values do not block it; where it shows the layer mixing examples (one example changed moves
    # another's output), wrong values are that mistake's symptom (checks/blame.py)
    CheckSpec("batching", "batching", own_tolerance=True, needs=("vmap_call", "vmap_vjp", "vjp"), prerequisites=("modes",),
              blocks_because="the layer mixes the examples of a batch",
              not_applicable=("contract_cases", "no_vmap", "custom_function_no_vmap"),
              contract_na=_section_says("batching")),
    # compare the layer with itself on other memory layouts or one tensor passed twice, so wrong values or first
    # derivatives block them (their comparisons are of outputs and gradients)
    CheckSpec("layout", "layout", prerequisites=("modes", "values", "gradients"),
              not_applicable=("no_strides",),
              contract_na=_section_says("layout")),
    CheckSpec("aliasing", "aliasing", needs=("input_changes", "vjp", "compilers"),
              prerequisites=("modes", "values", "gradients"),
              not_applicable=("contract_cases", "immutable_arrays", "function_alias_gradient", "no_gradient", "parts"),
              contract_na=_section_says("aliasing")),
    # the layer against itself: shapes and dtypes computed without data, and a program with a symbolic batch
    CheckSpec("abstract", "abstract", own_tolerance=True, needs=("abstract_outputs", "symbolic_batch"), prerequisites=("modes",),
              not_applicable=("imperative_function", "not_hybrid", "untraceable", "custom_function_no_vmap", "no_vmap", "parts"),
              contract_na=_section_says("abstract")),
    CheckSpec("compiled", "compiled", own_tolerance=True, needs=("compilers", "compile", "compiled_call", "compiled_vjp", "compile_stats"),
              alongside=True, prerequisites=("modes", "serialization"),
              not_applicable=("imperative_function", "not_hybrid"),
              contract_na=_section_says("compiled")),
    CheckSpec("export", "export", needs=("export_formats", "export_save", "export_load", "manual_seed", "vjp"),
              fresh_process=True, alongside=True, prerequisites=("modes",),
              not_applicable=("contract_cases", "no_format", "imperative_function", "not_hybrid", "untraceable", "parts"),
              contract_na=_section_says("export", prefix="")),
    # builds the layer the ways real code does (factory kwargs and meta-device initialisation in torch, build()
    # alone in Keras, nnx.eval_shape in JAX, deferred initialisation in Gluon) and compares the state with a
    # plain build's: about the constructor, so nothing blocks it, and once per target
    CheckSpec("construction", "construction", needs=("construction_run",),
              not_applicable=("not_a_module", "no_state", "lazy_module", "parts"),
              contract_na=_either(_function("a function contract constructs no layer"),
                                  _section_says("construction"))),
    CheckSpec("mixed_precision", "mixed_precision", needs=("mixed_precision_policies", "mixed_precision_run"),
              fresh_process=True, prerequisites=("modes",),
              opt_in="runs every layer under each framework's mixed-precision mechanisms, which a layer used only "
                     "in its own dtype never meets (about 1.03x the matrix's time)",
              not_applicable=("no_precision_policy", "not_a_module", "no_kernel", "parts"),
              contract_na=_section_says("mixed_precision")),
)

CHECK_IDS = tuple(c.id for c in CATALOG)
_SPECS = {c.id: c for c in CATALOG}
DEFAULT_CHECKS = [c.id for c in CATALOG if not c.opt_in]
OPT_IN = {c.id: c.opt_in for c in CATALOG if c.opt_in}
PER_DTYPE = tuple(c.id for c in CATALOG if c.per_dtype)
FRESH_PROCESS = tuple(c.id for c in CATALOG if c.fresh_process)
ALONGSIDE = tuple(c.id for c in CATALOG if c.alongside)
PREREQUISITES = {c.id: c.prerequisites for c in CATALOG if c.prerequisites}
BLOCKING_REASONS = {c.id: c.blocks_because for c in CATALOG if c.blocks_because}
DEVICE_CHECKS = tuple(c.id for c in CATALOG if c.device_column)
GRADIENT_TOLERANCE_CHECKS = tuple(c.id for c in CATALOG if c.gradient_tolerances)
REFERENCE_ERROR_CHECKS = tuple(c.id for c in CATALOG if c.reference_error)


def spec_of(check: str) -> CheckSpec | None:
    """The one declaration of ``check`` (None for an id the catalog does not know)."""
    return _SPECS.get(check)


def _prerequisites_first() -> tuple[str, ...]:
    order: list[str] = []

    def place(check: str) -> None:
        if check not in order:
            for first in _SPECS[check].prerequisites:
                place(first)
            order.append(check)
    for c in CATALOG:
        place(c.id)
    return tuple(order)


# the order a target's checks run in: CATALOG's, each check after what it rests on, so that a check that fails
# as a symptom finds its blocker's record already made (verdict.settle) on its own worker
RUN_ORDER = _prerequisites_first()
