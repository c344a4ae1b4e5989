"""What a user meets in the first week, through the public command line: the usage errors that say the fix (the one
argument or slot to map, MXNet's shim), one compiled failure said once, output files that follow the umask, the
summary's counts beside pytest's, and the README's first steps (--arg-map, building the wheel)."""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from layer_conformance.binding import problem
from tests.support import MXNET_PYTHON, ROOT, USER_LAYERS, pytest_run, user_package

README = (ROOT / "README.md").read_text()


def _installed(module):
    import importlib.util
    return importlib.util.find_spec(module) is not None


def _said(proc):
    return proc.stdout + proc.stderr


# --- the argument to map: the one candidate, named, in every framework -----------------------------------------------

def test_the_one_required_parameter_left_is_named_beside_a_close_match():
    """flax's and Gluon's own names (num_features, units; epsilon): d is the one required parameter left."""
    for required, params in ((["num_features", "rngs"], ["num_features", "epsilon", "rngs"]),
                             (["units"], ["units", "epsilon", "prefix", "params"]),
                             (["dim"], ["dim", "eps"])):
        said = problem("mypkg.layers:RMSNorm", {"params": params, "required": required, "takes_any": False},
                       {"d": 8, "eps": 1e-6})
        assert f"--arg-map d={required[0]}" in said, said
        assert "d=NAME" not in said, said
    # two names left, two required parameters left: no guess
    said = problem("m:L", {"params": ["a", "b"], "required": ["a", "b"], "takes_any": False}, {"d": 8, "eps": 1e-6})
    assert "--arg-map d=NAME" in said and "--arg-map eps=NAME" in said, said


NNX_LAYER = '''
import jax.numpy as jnp
from flax import nnx


class RMSNorm(nnx.Module):
    def __init__(self, num_features, *, epsilon=1e-6, rngs):
        self.gain = nnx.Param(jnp.ones(num_features))
        self.epsilon = epsilon

    def __call__(self, x):
        return self.gain[...] * x / jnp.sqrt((x ** 2).mean(-1, keepdims=True) + self.epsilon)
'''

# the README's Gluon RMSNorm under other constructor names (units, epsilon)
GLUON_LAYER = (USER_LAYERS["mxnet"].replace("def __init__(self, d, eps=1e-6", "def __init__(self, units, epsilon=1e-6")
               .replace("shape=(d,)", "shape=(units,)").replace("self.eps", "self.epsilon"))


@pytest.mark.parametrize("framework", ["jax", "mxnet"])
def test_arg_map_usage_error_names_the_unique_candidate(tmp_path, framework):
    if framework == "jax" and not _installed("flax"):
        pytest.skip("flax is not installed")
    if framework == "mxnet" and not MXNET_PYTHON.exists():
        pytest.skip("no .venv-mxnet here")
    user_package(tmp_path, NNX_LAYER if framework == "jax" else GLUON_LAYER)
    extra = ["--executor-python", f"mxnet={MXNET_PYTHON}"] if framework == "mxnet" else []
    proc = pytest_run("-q", "--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--framework", framework,
                      "--check", "values", "--dtype", "float32", *extra, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)},
                      timeout=300)
    said = _said(proc)
    assert proc.returncode == 4, said[-3000:]
    want = "num_features" if framework == "jax" else "units"
    assert f"--arg-map d={want} --arg-map eps=epsilon" in said, said[-3000:]
    assert "d=NAME" not in said, said[-3000:]


# --- the slot to map: the unique candidate, named ----------------------------------------------------------------

WRAPPED = '''
import torch
from torch import nn


class Affine(nn.Module):
    def __init__(self, d, value):
        super().__init__()
        self.weight = nn.Parameter(torch.full((d,), float(value)))


class RMSNorm(nn.Module):
    """gain and bias each held in a submodule of its own: 'gain.weight', 'bias.weight', both of shape [d]."""
    def __init__(self, d, eps=1e-6, bias=True):
        super().__init__()
        self.gain, self.bias, self.eps = Affine(d, 1.0), Affine(d, 0.0), eps

    def forward(self, x):
        return x * x.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt() * self.gain.weight + self.bias.weight
'''


@pytest.mark.skipif(not _installed("torch"), reason="torch is not installed")
def test_state_map_hint_names_the_unique_candidate(tmp_path):
    user_package(tmp_path, WRAPPED)
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "--contract", "rmsnorm_bias", "--impl", "mypkg.layers:RMSNorm", "--check", "parameters",
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=300)
    message = " ".join(r["message"] for r in json.loads(out.read_text())["results"] if r["check"] == "parameters")
    assert "--state-map gain=gain.weight" in message and "--state-map bias=bias.weight" in message, \
        _said(proc)[-3000:]
    assert "SLOT=NAME" not in message, message


# --- compiled: a Keras layer that cannot run under tf.function is one failure ------------------------------------

@pytest.mark.skipif(not _installed("tensorflow"), reason="tensorflow is not installed")
def test_a_layer_that_raises_under_tf_function_is_not_also_said_to_recompile(tmp_path):
    """A class named _RMSNorm: TensorFlow refuses its scope name at a tf.function's root, on every call. That is
    the failure; the recompile on the next call only follows from it."""
    out = tmp_path / "results.json"
    proc = pytest_run("-q", "--contract", "rmsnorm", "--impl", "tests.near_misses.tensorflow_wording:_RMSNorm",
                      "--framework", "tensorflow", "--arg-map", "d=", "--check", "compiled", f"--conformance-json={out}",
                      timeout=400)
    recs = [r for r in json.loads(out.read_text())["results"] if r["check"] == "compiled"]
    assert [r["outcome"] for r in recs] == ["failed"], _said(proc)[-3000:]
    message = recs[0]["message"]
    assert "the layer raises" in message, message
    assert "recompiled" not in message, message


# --- MXNet imported without the shim -------------------------------------------------------------------------------

# the README's Gluon RMSNorm without the shim's two lines
PLAIN_GLUON = USER_LAYERS["mxnet"].replace("apply()  # the README's shim, before importing mxnet\n", "").replace(
    "from layer_conformance.layerside.mxnet_shim import apply\n", "")


@pytest.mark.skipif(not MXNET_PYTHON.exists(), reason="no .venv-mxnet here")
def test_mxnet_imported_without_the_shim_is_a_usage_error_that_names_it(tmp_path):
    """The README's own environment (.venv-mxnet, MXNet 1.9.1 on numpy >= 1.24): a layer module that imports
    mxnet without the shim. Not "module has no attribute 'RMSNorm'": the import's own error and the shim."""
    user_package(tmp_path, PLAIN_GLUON)
    proc = subprocess.run([str(MXNET_PYTHON), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--contract", "rmsnorm",
                           "--impl", "mypkg.layers:RMSNorm", "--check", "values"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    said = _said(proc)
    assert proc.returncode == 4, said[-3000:]
    assert "has no attribute 'RMSNorm'" not in said, said[-3000:]
    assert "module 'numpy' has no attribute 'bool'" in said, said[-3000:]
    assert "from layer_conformance.layerside.mxnet_shim import apply; apply()" in said, said[-3000:]


# --- output files and counts ------------------------------------------------------------------------------------

@pytest.mark.skipif(not _installed("torch"), reason="torch is not installed")
def test_output_files_follow_the_umask_and_the_counts_agree_with_pytests(tmp_path):
    user_package(tmp_path, USER_LAYERS["torch"])
    old = os.umask(0o022)
    try:
        proc = pytest_run("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--check", "values",
                          "--check", "buffers", "--check", "device_parity", "--check", "construction",
                          "--conformance-json=out.json", "--conformance-html=out.html", "--junitxml=junit.xml",
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=400)
    finally:
        os.umask(old)
    said = _said(proc)
    assert proc.returncode == 0, said[-3000:]
    for name in ("out.json", "out.html", "junit.xml"):
        assert oct((tmp_path / name).stat().st_mode & 0o777) == oct(0o644), name
    # "27 passed, 0 failed, 0 blocked, 13 n/a, 2 skipped, 0 error" beside pytest's "27 passed, 2 skipped"
    ours = re.search(r"^(\d+) passed, (\d+) failed, (\d+) blocked, (\d+) n/a, (\d+) skipped, (\d+) error$", said, re.M)
    assert ours, said[-3000:]
    theirs = re.search(r"=+ (\d+) passed(?:, (\d+) skipped)? in ", said)
    assert theirs, said[-3000:]
    passed, failed, blocked, na, skipped, error = map(int, ours.groups())
    assert passed == int(theirs.group(1)) and blocked + skipped == int(theirs.group(2) or 0), said[-3000:]
    assert na > 0, said[-3000:]   # buffers: the contract has no buffer slot, never collected
    doc = json.loads((tmp_path / "out.json").read_text())
    assert na == doc["not_collected"], doc["not_collected"]


# --- the README's first steps -------------------------------------------------------------------------------------

def _section(title):
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_first_run_shows_arg_map():
    assert "--arg-map" in _section("First run")


def test_readme_says_how_to_build_the_wheel_as_the_tests_do():
    """scripts/wheel-envs.sh builds the wheel the tests install with `python -m build --wheel`."""
    assert "-m build --wheel" in (ROOT / "scripts" / "wheel-envs.sh").read_text()
    install = _section("Install")
    assert "python -m build --wheel" in install and "dist/" in install, install
