"""The checks. Each is a function of a CheckContext, written once for every framework.

It returns None or a dict of details (passed), raises CheckFailed (failed), ``NotApplicable`` (n/a, as an
adapter does: ``layer_conformance.record.NotApplicable``) or CheckSkipped (a skip that is not n/a: ``checks.base``).
To add a check: write ``check_<id>`` in the module for its area and declare it in
``layer_conformance.check_catalog.CATALOG``, where everything the harness knows of a check is said once;
the tables below are derived from it.
"""
from .base import CheckContext, CheckFailed, CheckSkipped, unexpected_error
from ..check_catalog import (ALONGSIDE, CATALOG, DEFAULT_CHECKS, FRESH_PROCESS, OPT_IN, PER_DTYPE, CheckSpec)

# id -> check function, in the catalog's order (the order a run collects the checks in)
CHECKS = {spec.id: spec.function for spec in CATALOG}

__all__ = ["ALONGSIDE", "CATALOG", "CHECKS", "CheckSpec", "DEFAULT_CHECKS", "FRESH_PROCESS", "OPT_IN", "PER_DTYPE",
           "CheckContext", "CheckFailed", "CheckSkipped", "unexpected_error"]
