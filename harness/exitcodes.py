"""The exit codes of a conformance run and of ``python -m layer_conformance``: defined here and nowhere else,
so that the plugin, the gate and the command line cannot drift apart. The numbers are pytest's own
(``pytest.ExitCode``) where the meanings overlap; 3 is pytest's INTERNAL_ERROR, which a run that stops on a
broken contract (``pytest.exit``) reports instead."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0                 # conformant: passed, skipped, or failed as an expectations entry says; no regressions
    FAILED = 1             # a layer failed (or regressed against the baseline), or the run missed part of its plan
    INTERRUPTED = 2        # pytest's own: Ctrl-C, a collection error that is not a contract
    CONTRACT_ERROR = 3     # a contract file could not be loaded
    USAGE_ERROR = 4        # bad options or files (expectations, baseline, results to merge)
    NOTHING_SELECTED = 5   # pytest's own: nothing was collected


# the names the modules have always imported (layer_conformance.gate re-exports the first five)
EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.FAILED
EXIT_INTERRUPTED = ExitCode.INTERRUPTED
EXIT_CONTRACT = EXIT_CONTRACT_ERROR = ExitCode.CONTRACT_ERROR
EXIT_USAGE = ExitCode.USAGE_ERROR
EXIT_NOTHING_SELECTED = ExitCode.NOTHING_SELECTED
