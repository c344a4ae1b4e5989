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

# The package, by step of the loading: ``problems`` (ContractError, the bounds), ``yaml_lines`` (the safe reader with
# lines), ``schema`` (the schema and its errors in an author's words), ``rules`` (what the schema cannot say),
# ``sections`` and ``model`` (the frozen sections and the Contract object), ``loading`` (load_contract). The public
# names stay where they have always been, ``layer_conformance.contract``:
from .problems import (CONTRACT_ELEMENTS_PER_INPUT, DEFAULT_MAX_INPUT_ELEMENTS, JUDGE_MEMORY_MULTIPLE,  # noqa: F401
                       MAX_CONTRACT_ELEMENTS_ENV, MAX_DEPTH, MAX_ELEMENTS, MAX_INPUT_ELEMENTS_ENV, MAX_MESSAGE,
                       MAX_NODES, MAX_RUN_ELEMENTS_ENV, RUN_ELEMENTS_PER_INPUT, ContractError, ContractNotFound)
from .schema import CHECK_IDS, MAX_TIMEOUT, SCHEMA_PATH, schema  # noqa: F401
from .sections import (Abstract, Aliasing, Batching, Case, Compiled, Composition, Construction, Draw,  # noqa: F401
                       Export, ForwardExample, ForwardExpected, ForwardMode, Gradients, InputSpec, Layout,
                       MixedPrecision, Modes, Native, Property, Reference, SecondOrder, Slot, StrictLoading,
                       Tolerance, Tolerances, Train, WorkedExample)
from .model import Contract, default_dtype_of  # noqa: F401
from .rules import SECTION_RULES  # noqa: F401
from .loading import (SPECS_DIR, ElementBudget, ReferenceNames, bundled_contracts, find_contract,  # noqa: F401
                      input_element_limit, load_contract)
