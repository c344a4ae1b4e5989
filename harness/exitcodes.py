"""The exit codes of a conformance run and of ``python -m layer_conformance``, and the one function that decides
a run's exit status (``exit_status``): defined here and nowhere else, so that the plugin, the gate and the command
line cannot drift apart. The numbers are pytest's own (``pytest.ExitCode``) where the meanings overlap; 3 is
pytest's INTERNAL_ERROR, which a run that stops on a broken contract (``stop_for_broken_contract``) reports instead.

Everything else hands data to ``exit_status`` (the verdict's code, what pytest decided, the run's problems): the
session's end sets ``session.exitstatus`` from it once (layer_conformance.run.session_end), and ``merge --gate``
returns it (layer_conformance.cli). tests/meta_tests/test_one_exit.py holds that."""
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


def verdict_decides(pytest_status: int, nothing_selected: bool = False) -> bool:
    """Whether the verdict's code is the run's: where pytest's own status is 0 or 1, and where a --changed-since run
    selected nothing (pytest's 5: it is still gated). Otherwise (interrupted, a usage error) pytest's status stands."""
    return pytest_status in (ExitCode.OK, ExitCode.FAILED) or (nothing_selected
                                                                and pytest_status == ExitCode.NOTHING_SELECTED)


def exit_status(verdict_code: int | None, pytest_status: int = ExitCode.OK, *, nothing_selected: bool = False,
                incomplete: bool = False, usage_error: bool = False, unwritten: bool = False,
                inputs_changed: bool = False, contract_error: bool = False) -> int:
    """The run's exit status, the one place it is decided.

    verdict_code: the verdict's (``layer_conformance.verdict``; None: no verdict decides it, pytest's stands).
    pytest_status: what pytest decided (interrupted, a collection error, the user's own tests).
    nothing_selected: a --changed-since run that selected nothing (``verdict_decides``).
    incomplete: a planned check never reported: never 0 (nor 5).
    usage_error: a record says its binding does not fit its layer: 4 where it would be 0 or 1.
    unwritten: an output file could not be written: never 0.
    inputs_changed: a contract, bindings or expectations file changed during the run: 4, no verdict.
    contract_error: a contract did not load: 3, before any collection (``stop_for_broken_contract``)."""
    if contract_error:
        return ExitCode.CONTRACT_ERROR
    if inputs_changed:
        return ExitCode.USAGE_ERROR
    status = pytest_status
    if verdict_code is not None and verdict_decides(pytest_status, nothing_selected):
        status = verdict_code
    if incomplete and status in (ExitCode.OK, ExitCode.NOTHING_SELECTED):
        status = ExitCode.FAILED
    if usage_error and status in (ExitCode.OK, ExitCode.FAILED):
        status = ExitCode.USAGE_ERROR
    if unwritten and status == ExitCode.OK:
        status = ExitCode.FAILED
    return status


def stop_for_broken_contract(message: str):
    """A contract that does not load stops the run while pytest configures it, before any collection (exit 3,
    ``message`` printed once by pytest): pytest runs no session end for a run stopped there, so its status is given
    with the stop (still ``exit_status``'s)."""
    import pytest
    pytest.exit(message, returncode=exit_status(None, contract_error=True))
