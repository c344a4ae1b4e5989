"""The CI gate (expectations, baselines): a second pytest plugin (``layer_conformance.gate``, an entry point of
its own; its hooks are in ``layer_conformance.gate.hooks``). The conformance plugin asks it for the run's verdict
once (``pytest_conformance_verdict``); the outputs (the HTML report and its option among them) live in
``layer_conformance.outputs``.

Exit codes of a conformance run (``layer_conformance.exitcodes``, pytest's numbering where the meanings
overlap; the verdict that picks 0 or 1 is ``layer_conformance.verdict``'s):

* 0 -- conformant: every check passed, was skipped, or failed as an expectations entry says it
  will; with ``--baseline``: no regressions against the baseline. A ``--changed-since`` run that
  selects nothing exits 0 (not pytest's 5) with lines saying why no changed file selects a binding,
  unless a baseline binding was removed.
* 1 -- a check failed or errored without an expectations entry; with ``--baseline``: a regression
  only, i.e. a check that fails or errors now but did not in the baseline (it passed there, was
  skipped, or is new) and has no expectations entry, a check that passed in the baseline and is
  skipped now, or a baseline record (any outcome) that this run did not produce; under
  ``--strict-expectations`` also an expected failure that now passes, and an entry that matches no
  check or whose checks no longer fail.
* 2 -- interrupted (pytest's own: Ctrl-C, a collection error that is not a contract).
* 3 -- broken contract: a contract file could not be loaded.
* 4 -- usage error: bad options, a malformed expectations file (a glob entry without
  ``--allow-glob-expectations`` among them), an unreadable baseline.
* 5 -- nothing was collected (pytest's own).

An expectations file (``--expectations FILE``) lists known failures::

    expectations:
      - contract: rmsnorm            # exact ids; a missing key matches anything, except check: an
        impl: "mypkg.layers:RMSNorm" # entry names the exact check it excuses
        framework: tensorflow
        check: serialization
        expected: fail               # fail (= failed or error), failed, error, or a list of these
        reason: keras 3 drops the gain on reload    # reason or link is required
        link: https://example.org/issues/12

Globs (``check: "*"``, ``impl: "mypkg.layers:*"``) and entries without ``check`` are a usage error
unless ``--allow-glob-expectations`` is given (a command-line flag, not an ini key): an excuse a pull
request writes beside the layer it breaks then names what it excuses. Under ``--changed-since REV``
the gate lists, before its verdict, every entry the branch added since the merge base with REV
(``selection.expectations_added`` in the results file, with --bindings).
"""

from __future__ import annotations

from ..exitcodes import EXIT_CONTRACT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ..record import FAILING, KEY as KEY_FIELDS
from ..results import Comparison, compare
from .expectations import (Expectation, ExpectationsError, added_since, apply_expectations, excuse, excused,
                           expectation_for, expectations_at, load_expectations, parse_expectations,
                           stale_expectations, unmatched, updated_expectations, write_expectations)
# pytest registers this module as the plugin: the hooks must be names in it
from .hooks import (Gate, pytest_addoption, pytest_configure, pytest_conformance_verdict,
                    pytest_runtest_makereport)

__all__ = ["FAILING", "KEY_FIELDS", "Comparison", "compare", "Expectation", "ExpectationsError", "added_since",
           "apply_expectations", "excuse", "excused", "expectations_at", "parse_expectations",
           "expectation_for", "load_expectations", "stale_expectations", "unmatched", "updated_expectations",
           "write_expectations", "EXIT_OK", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_CONTRACT", "EXIT_USAGE",
           "Gate", "pytest_addoption", "pytest_configure", "pytest_conformance_verdict", "pytest_runtest_makereport"]
