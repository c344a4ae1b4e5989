"""Quiet output and the gate on a user's first pull request, each run the user's way (pytest in a directory of
the user's own): the output says what the run left out, and nothing it need not say."""
import importlib.util
import textwrap

import pytest

from tests.test_plugin import USER_LAYER, pytest_run

requires_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.pytest.ini_options]
        testpaths = ["tests"]
        conformance_contract = ["rmsnorm"]
        conformance_impl = "mypkg.layers:RMSNorm"
    """))
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "layers.py").write_text(USER_LAYER)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text("def test_mine():\n    assert sum([1, 2]) == 3\n")
    return tmp_path


LEFT_OUT = "are not part of this run"


def test_a_run_of_the_testpaths_says_once_that_the_checks_are_left_out(project):
    proc = pytest_run("tests", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert out.count(LEFT_OUT) == 1, out[-3000:]
    line = next(x for x in out.splitlines() if LEFT_OUT in x)
    assert "conformance_impl" in line and "pytest -m conformance" in line, line


def test_deselecting_the_checks_on_purpose_is_not_told_again(project):
    proc = pytest_run("tests", "-m", "not conformance", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert LEFT_OUT not in out, out[-3000:]


@requires_torch
def test_a_run_that_holds_the_checks_does_not_say_they_are_left_out(project):
    proc = pytest_run("--check", "parameters", cwd=project)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "2 passed" in out and LEFT_OUT not in out, out[-3000:]
