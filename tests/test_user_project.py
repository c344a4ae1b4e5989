"""A user's project with its own tests and the conformance settings in its pyproject.toml: the checks are
collected beside the user's tests, and the `conformance` marker selects or leaves them out."""
import importlib.util
import textwrap

import pytest

from layer_conformance.contract import find_contract
from tests.support import USER_LAYER, pytest_run, user_package

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

PYPROJECT = textwrap.dedent("""\
    [tool.pytest.ini_options]
    conformance_contract = ["rmsnorm"]
    conformance_impl = "mypkg.layers:RMSNorm"
""")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    # leaves a trace when imported: a run that leaves the checks out must not import the layer (nor torch)
    user_package(tmp_path, "import pathlib\npathlib.Path(__file__).with_name('imported').touch()\n" + USER_LAYER)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text("def test_mine():\n    assert sum([1, 2]) == 3\n")
    (tmp_path / "tests" / "test_other.py").write_text("def test_other():\n    assert 'other' == 'other'\n")
    return tmp_path


CHECK = "rmsnorm[RMSNorm-torch-cpu]::parameters"


def run(project, *args):
    marker = project / "mypkg" / "imported"
    marker.unlink(missing_ok=True)
    # --sandbox off: the marker is the layer's own write into the project, which a sandbox makes read-only
    proc = pytest_run("-v", "--check", "parameters", "--sandbox", "off", *args, cwd=project)
    out = proc.stdout + proc.stderr
    # `-v` lines: "tests/test_mine.py::test_mine PASSED [ 50%]", "<contract>::rmsnorm[...]::parameters PASSED ..."
    ran = {line.split(" ")[0].split("::", 1)[1] for line in proc.stdout.splitlines()
           if "::" in line.split(" ")[0] and any(f" {w}" in line for w in ("PASSED", "FAILED", "ERROR", "SKIPPED"))}
    return proc, out, ran, marker.exists()


def test_a_bare_run_holds_the_users_tests_and_the_checks(project):
    proc, out, ran, imported = run(project)
    assert proc.returncode == 0, out[-3000:]
    assert {"test_mine", "test_other", CHECK} <= ran, out[-3000:]
    assert imported


def test_one_test_file_runs_just_that_file(project):
    """An ini-configured check belongs to whole-project runs, not to `pytest tests/test_mine.py`
    (or an IDE running one test): that runs the file alone and never imports the layer."""
    proc, out, ran, imported = run(project, "tests/test_mine.py")
    assert proc.returncode == 0, out[-3000:]
    assert ran == {"test_mine"}, out[-3000:]
    assert not imported


def test_the_rootdir_as_argument_includes_the_checks(project):
    proc, out, ran, _ = run(project, ".")
    assert proc.returncode == 0, out[-3000:]
    assert {"test_mine", "test_other", CHECK} <= ran, out[-3000:]


def test_impl_on_the_command_line_adds_the_checks_to_the_files_given(project):
    proc, out, ran, _ = run(project, "--impl", "mypkg.layers:RMSNorm", "--contract", "rmsnorm", "tests/test_mine.py")
    assert proc.returncode == 0, out[-3000:]
    assert ran == {"test_mine", CHECK}, out[-3000:]     # test_other, in the same directory, is not asked for


def test_a_user_contract_at_the_project_root_is_collected_once(project):
    """The contract's directory (the project root) becomes a collection argument: it must not pull in
    the user's other tests, nor collect the contract twice."""
    (project / "mine.yaml").write_text(find_contract("rmsnorm").read_text())
    proc, out, ran, _ = run(project, "--impl", "mypkg.layers:RMSNorm", "--contract", "mine.yaml", "tests/test_mine.py")
    assert proc.returncode == 0, out[-3000:]
    assert ran == {"test_mine", CHECK}, out[-3000:]
    assert "2 passed" in proc.stdout


def test_marker_selects_only_the_checks(project):
    proc, out, ran, _ = run(project, "-m", "conformance")
    assert proc.returncode == 0, out[-3000:]
    assert ran == {CHECK}, out[-3000:]
    assert "2 deselected" in proc.stdout


def test_not_marker_leaves_the_checks_out_without_importing_the_layer(project):
    proc, out, ran, imported = run(project, "-m", "not conformance")
    assert proc.returncode == 0, out[-3000:]
    assert ran == {"test_mine", "test_other"}, out[-3000:]
    assert not imported, "the layer (and its framework) was imported although no check could be selected"
    assert "layer conformance" not in proc.stdout       # no header, no summary table
