"""The one declaration of each check. Every table of checks is derived from ``CATALOG``.

A check's id is part of the public interface (test ids, results files, expectations, a contract's
``checks:`` and ``tolerances.checks``). The order of ``CATALOG`` is the order a run collects and
reports the checks in. Importing this module imports nothing (no check, no numpy), so that the contract
loader, which the plugin imports at pytest's start, can fill the schema from it.

Derived from it: the tables at the end of this module; ``CHECKS`` (id -> function) in
``layer_conformance.checks``; the contract schema's ``$defs.check_id`` (filled in when it is loaded).
Tested against it: docs/checks.md's table of checks and the checks the hints of ``mistakes.py`` name
(tests/meta_tests/test_check_declarations.py).
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

    @property
    def function(self) -> Callable:
        """``check_<id>`` of its module (imported on first use)."""
        return getattr(importlib.import_module(f"{__package__}.checks.{self.module}"), f"check_{self.id}")


# Why these values: the layer must follow the framework's mode switch (``modes``) before its outputs can be
# compared, and its outputs must be right (``values``) before what is derived from them (native parity,
# gradients, forward-mode tangents, cross-device parity, properties of the outputs); second derivatives rest on
# the first (``gradients``). compiled, export and mixed_precision compare evaluation-mode calls of the layer
# (compiled, reloaded, or under a policy) with the eager one; compiled builds its eager twin from the same state,
# which rests on that state making a faithful fresh instance (``serialization``). compiled and export are not
# per dtype: they compare with the same layer run eagerly, in whatever dtype, so a dtype would add nothing but
# their cost; together they take about as long as all the others, which leave a core idle (alongside).
CATALOG: tuple[CheckSpec, ...] = (
    CheckSpec("parameters", "state"),
    CheckSpec("buffers", "state"),
    CheckSpec("composition", "registration"),
    CheckSpec("serialization", "registration", prerequisites=("modes",),
              blocks_because="the layer's state does not make a faithful fresh instance"),
    CheckSpec("devices", "registration", device_column=True, prerequisites=("modes",)),
    CheckSpec("device_parity", "registration", device_column=True, prerequisites=("modes", "values")),
    CheckSpec("values", "numerics", per_dtype=True, prerequisites=("modes",),
              blocks_because="the outputs already differ from the reference"),
    CheckSpec("native", "numerics", per_dtype=True, prerequisites=("modes", "values")),
    CheckSpec("gradients", "numerics", per_dtype=True, gradient_tolerances=True,
              prerequisites=("modes", "values"), blocks_because="the first derivatives are already wrong"),
    CheckSpec("strict_loading", "loading"),
    CheckSpec("modes", "modes", per_dtype=True,
              blocks_because="the layer does not follow the framework's training/inference switch"),
    CheckSpec("properties", "properties", per_dtype=True, prerequisites=("modes", "values")),
    CheckSpec("forward_mode", "forward", per_dtype=True, gradient_tolerances=True, prerequisites=("modes", "values")),
    CheckSpec("second_order", "second_order", per_dtype=True, gradient_tolerances=True,
              prerequisites=("modes", "values", "gradients")),
    # compares the layer with itself (examples alone, permuted, one changed, vectorised), not with the reference,
    # so wrong values do not block it: a layer that mixes examples fails both
    CheckSpec("batching", "batching", prerequisites=("modes",)),
    # compare the layer with itself on other memory layouts or one tensor passed twice, so wrong values or first
    # derivatives block them (their comparisons are of outputs and gradients)
    CheckSpec("layout", "layout", prerequisites=("modes", "values", "gradients")),
    CheckSpec("aliasing", "aliasing", prerequisites=("modes", "values", "gradients")),
    # the layer against itself: shapes and dtypes computed without data, and a program with a symbolic batch
    CheckSpec("abstract", "abstract", prerequisites=("modes",)),
    CheckSpec("compiled", "compiled", alongside=True, prerequisites=("modes", "serialization")),
    CheckSpec("export", "export", fresh_process=True, alongside=True, prerequisites=("modes",)),
    # builds the layer the ways real code does (factory kwargs and meta-device initialisation in torch, build()
    # alone in Keras, nnx.eval_shape in JAX, deferred initialisation in Gluon) and compares the state with a
    # plain build's: about the constructor, so nothing blocks it, and once per target
    CheckSpec("construction", "construction"),
    CheckSpec("mixed_precision", "mixed_precision", fresh_process=True, prerequisites=("modes",),
              opt_in="runs every layer under each framework's mixed-precision mechanisms, which a layer used only "
                     "in its own dtype never meets (about 1.03x the matrix's time)"),
)

CHECK_IDS = tuple(c.id for c in CATALOG)
DEFAULT_CHECKS = [c.id for c in CATALOG if not c.opt_in]
OPT_IN = {c.id: c.opt_in for c in CATALOG if c.opt_in}
PER_DTYPE = tuple(c.id for c in CATALOG if c.per_dtype)
FRESH_PROCESS = tuple(c.id for c in CATALOG if c.fresh_process)
ALONGSIDE = tuple(c.id for c in CATALOG if c.alongside)
PREREQUISITES = {c.id: c.prerequisites for c in CATALOG if c.prerequisites}
BLOCKING_REASONS = {c.id: c.blocks_because for c in CATALOG if c.blocks_because}
DEVICE_CHECKS = tuple(c.id for c in CATALOG if c.device_column)
GRADIENT_TOLERANCE_CHECKS = tuple(c.id for c in CATALOG if c.gradient_tolerances)
