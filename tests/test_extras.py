"""An environment that lacks a package a framework needs is the user's to fix: a usage error (exit 4) that names
the package and what to do, never a layer failure, a blocked verdict or a hint that blames the layer. Run the
user's way: the public command line, from the user's own directory.

The package is made absent the way it is absent in a venv without it: the import system itself refuses it (a
sitecustomize on PYTHONPATH sets its sys.modules entry to None, in the judge and in every executor), so the
ModuleNotFoundError carries the package's name and no frame of a stand-in: the deepest frame is the importer's.
"""
import json
import textwrap
from pathlib import Path

import pytest

from tests.support import USER_LAYERS, pytest_run

ABSENT = '''import sys

sys.modules[{name!r}] = None  # `import {name}` raises ModuleNotFoundError(name={name!r}) from the import system
'''


def _absent(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "absent"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(ABSENT.format(name=name))
    return folder


def test_jax_export_without_flatbuffers_is_a_usage_error_naming_it(tmp_path):
    pytest.importorskip("jax")
    pytest.importorskip("flax")
    project = tmp_path / "project"
    project.mkdir()
    (project / "mylayer.py").write_text(textwrap.dedent(USER_LAYERS["jax"]))
    env = {"PYTHONPATH": str(_absent(tmp_path, "flatbuffers"))}
    proc = pytest_run("-n", "0", "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--check", "export",
                      "--dtype", "float32", "--conformance-json", "out.json", cwd=project, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    (record,) = [r for r in json.loads((project / "out.json").read_text())["results"] if r["check"] == "export"]
    assert record["outcome"] == "error" and record["usage_error"], record
    assert "usage error: the package 'flatbuffers' is not installed, and jax needs it here: pip install flatbuffers" \
        in record["message"], record
    assert "callback" not in record["message"] and "blocked by" not in out, out  # no hint blaming the layer


def test_a_layer_importing_what_is_not_installed_is_the_layers_failure(tmp_path):
    """The user's own import of a missing package is the layer's mistake (raised at the user's line)."""
    pytest.importorskip("jax")
    pytest.importorskip("flax")
    project = tmp_path / "project"
    project.mkdir()
    layer = USER_LAYERS["jax"].replace("        x32 = x.astype", "        import flatbuffers  # noqa: F401\n        x32 = x.astype")
    (project / "mylayer.py").write_text(textwrap.dedent(layer))
    env = {"PYTHONPATH": str(_absent(tmp_path, "flatbuffers"))}
    proc = pytest_run("-n", "0", "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--check", "values",
                      "--dtype", "float32", "--conformance-json", "out.json", cwd=project, env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 4 and "usage error" not in out, out
    (record,) = [r for r in json.loads((project / "out.json").read_text())["results"] if r["check"] == "values"]
    assert record["outcome"] in ("failed", "blocked") and not record.get("usage_error"), record
    assert "ModuleNotFoundError: import of flatbuffers halted" in json.dumps(record), record
    assert "mylayer.py" in json.dumps(record), record  # where the layer imported it
