"""One exit, one record constructor, one writer per stash key (issue 45 §4, §5): the exit status is decided by one
function (``exitcodes.exit_status``) and set in one place (the session's end; ``merge --gate`` returns it); a record
is constructed by one function (``record.make``); each phase of the run (layer_conformance.run) writes its own stash
keys, and none another's. Everything else hands them data."""
from __future__ import annotations

import ast

from tests.support import ROOT

HARNESS = ROOT / "harness"

# (module, function) where session.exitstatus is assigned; where pytest.exit / sys.exit is called
EXIT_STATUS_SET = {("run/session_end.py", "SessionEnd.pytest_sessionfinish")}
EXIT_CALLED = {("exitcodes.py", "stop_for_broken_contract"), ("__main__.py", "")}
RECORD_MADE = {("record.py", "make")}
# the stash keys of the run's phases, each with the one module that writes it
STASH_WRITERS = {"CONFIGURED_KEY": "run/configure.py", "EXECUTORS_KEY": "run/configure.py",
                 "PLAN_KEY": "run/collection.py", "DESELECTED_KEY": "run/collection.py",
                 "_RUNNING_KEY": "run/running.py", "REPORTED_KEY": "run/running.py",
                 "ENDED_KEY": "run/session_end.py", "_RESULT_KEY": "run/session_end.py"}


def _calls(tree: ast.AST):
    """(qualified function, node) of every node, with the function (or class.method) it lies in ("" at top level)."""
    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from walk(child, f"{where}.{child.name}" if where else child.name)
            else:
                yield where, child
                yield from walk(child, where)
    yield from walk(tree, "")


def _sites(predicate) -> set:
    found = set()
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        tree = ast.parse(path.read_text())
        if rel != "record.py" and any(isinstance(n, ast.ClassDef) and n.name == "Record" for n in ast.walk(tree)):
            continue   # a class of its own by that name (the layer side's fingerprint), not the result record
        for where, node in _calls(tree):
            if predicate(node):
                found.add((rel, where))
    return found


def _sets_exitstatus(node) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
    return any(isinstance(t, ast.Attribute) and t.attr == "exitstatus" for t in targets)


def _calls_exit(node) -> bool:
    f = getattr(node, "func", None) if isinstance(node, ast.Call) else None
    # (os._exit ends a forked process of the layer side, never the run)
    return isinstance(f, ast.Attribute) and f.attr == "exit" and isinstance(f.value, ast.Name) and \
        f.value.id in ("pytest", "sys")


def _constructs_record(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "Record") or (isinstance(f, ast.Attribute) and f.attr == "Record")


def test_the_exit_status_is_set_in_one_place():
    assert _sites(_sets_exitstatus) == EXIT_STATUS_SET


def test_only_the_owner_exits():
    assert _sites(_calls_exit) == EXIT_CALLED


def test_the_owner_decides_from_the_verdict():
    from layer_conformance.exitcodes import ExitCode, exit_status
    assert exit_status(ExitCode.FAILED) == ExitCode.FAILED
    assert exit_status(ExitCode.OK, ExitCode.FAILED) == ExitCode.OK          # the gate excused pytest's failures
    assert exit_status(ExitCode.OK, ExitCode.INTERRUPTED) == ExitCode.INTERRUPTED   # pytest's own stands
    assert exit_status(ExitCode.OK, ExitCode.NOTHING_SELECTED, nothing_selected=True) == ExitCode.OK
    assert exit_status(None, ExitCode.NOTHING_SELECTED, incomplete=True) == ExitCode.FAILED
    assert exit_status(ExitCode.FAILED, usage_error=True) == ExitCode.USAGE_ERROR
    assert exit_status(ExitCode.OK, unwritten=True) == ExitCode.FAILED
    assert exit_status(ExitCode.OK, ExitCode.INTERRUPTED, inputs_changed=True) == ExitCode.USAGE_ERROR
    assert exit_status(None, contract_error=True) == ExitCode.CONTRACT_ERROR


def test_a_record_is_constructed_in_one_place():
    """``Record(...)`` only in ``record.make``; a record's copy only through ``record.derived`` (no
    ``dataclasses.replace`` in a module that handles records)."""
    assert _sites(_constructs_record) == RECORD_MADE
    copies = set()
    for path in sorted(HARNESS.rglob("*.py")):
        rel = path.relative_to(HARNESS).as_posix()
        text = path.read_text()
        if rel == "record.py" or "Record" not in text:
            continue
        for where, node in _calls(ast.parse(text)):
            f = getattr(node, "func", None) if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and f.attr == "replace" and getattr(f.value, "id", "") == "dataclasses":
                copies.add((rel, where))
    assert not copies, copies


def _stash_writes(node) -> list[str]:
    """The names of the keys ``node`` assigns in a stash (``config.stash[KEY] = ...``)."""
    targets = node.targets if isinstance(node, ast.Assign) else []
    return [t.slice.id for t in targets if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute)
            and t.value.attr == "stash" and isinstance(t.slice, ast.Name)]


def test_each_phase_writes_its_own_stash_keys():
    written: dict = {}
    for path in sorted([HARNESS / "plugin.py", *(HARNESS / "run").glob("*.py")]):
        rel = path.relative_to(HARNESS).as_posix()
        for _, node in _calls(ast.parse(path.read_text())):
            for key in _stash_writes(node):
                written.setdefault(key, set()).add(rel)
    assert written == {k: {v} for k, v in STASH_WRITERS.items()}


def test_the_measures_find_what_they_look_for():
    tree = ast.parse("class S:\n    def f(self, session):\n        session.exitstatus = 1\n        pytest.exit('x')\n"
                     "        return Record(a=1)\n")
    found = {(where, type(node).__name__) for where, node in _calls(tree)
             if _sets_exitstatus(node) or _calls_exit(node) or _constructs_record(node)}
    assert found == {("S.f", "Assign"), ("S.f", "Call")}
