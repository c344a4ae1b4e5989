"""What the harness's own tests share: plain helpers, constants and sample data (fixtures are in conftest.py).

Not a test module: test modules import from here, never from one another nor from conftest.py
(tests/meta_tests/test_suite_shape.py holds them to that). Layers and data that are themselves the subject of
tests (tests/hostile/*_hostile.py, tests/mutants/, tests/zoo/, tests/near_misses/) stay where they are.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MXNET_PYTHON = ROOT / ".venv-mxnet" / "bin" / "python"


# --- the plugin through the public command line ---------------------------------------------------------------

def pytest_command(*args) -> list[str]:
    """``python -m pytest -p no:cacheprovider ARGS`` with this interpreter: the command a user types (for the
    runs a test starts with subprocess.Popen itself, several at once or to signal; otherwise ``pytest_run``)."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *map(str, args)]


def pytest_run(*args, cwd=ROOT, env=None, timeout=600) -> subprocess.CompletedProcess:
    """Run the plugin as a user does: ``python -m pytest -p no:cacheprovider ARGS`` in a subprocess from ``cwd``
    (the checkout unless given), stdout and stderr captured as text. ``env``: variables set over this process's
    environment (PYTHONPATH, to import modules of this repository from a directory of the user's own)."""
    return subprocess.run(pytest_command(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def executor_pythons(framework: str) -> dict:
    """The ``pythons`` a Session needs for ``framework`` (MXNet lives in its own environment); skips the
    test where the framework is not here."""
    from layer_conformance.frameworks import installed
    if framework == "mxnet":
        if not MXNET_PYTHON.exists():
            pytest.skip("no .venv-mxnet here")
        return {"mxnet": str(MXNET_PYTHON)}
    if not installed(framework):
        pytest.skip(f"{framework} is not installed")
    return {}


# --- a user's layers --------------------------------------------------------------------------------------------

def torch_rmsnorm(d: str = "d", gain: str = "gain", preamble: str = "", factor: str = "") -> str:
    """A user's correct RMSNorm in torch, the one every test that needs one writes: its constructor argument
    named ``d``, its gain ``gain``; ``preamble``: lines after the imports; ``factor``: an expression its output
    is multiplied by (a test that breaks the layer through it)."""
    times = f" * {factor}" if factor else ""
    return f'''
import torch
from torch import nn
{preamble}

class RMSNorm(nn.Module):
    def __init__(self, {d}, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.{gain} = nn.Parameter(torch.ones({d}))

    def forward(self, x):
        return x * torch.rsqrt(x.to(torch.promote_types(x.dtype, torch.float32)).pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.{gain}{times}
'''


# a user's RMSNorm in each framework, written the way the README's example expects
USER_LAYERS = {
    "torch": torch_rmsnorm(),
    "tensorflow": '''
import keras
from keras import ops


class RMSNorm(keras.layers.Layer):
    def __init__(self, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps

    def build(self, shape):
        self.gain = self.add_weight(name="gain", shape=[shape[-1]], initializer="ones")

    def call(self, x):
        x32 = ops.cast(x, "float32") if x.dtype in ("float16", "bfloat16") else x
        rms = ops.rsqrt(ops.mean(x32 ** 2, axis=-1, keepdims=True) + self.eps)
        return self.gain * ops.cast(x32 * rms, x.dtype)
''',
    "jax": '''
import jax.numpy as jnp
from flax import nnx


class RMSNorm(nnx.Module):
    def __init__(self, d, eps=1e-6):
        self.gain = nnx.Param(jnp.ones(d))
        self.eps = eps

    def __call__(self, x):
        x32 = x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x
        return self.gain[...] * (x32 / jnp.sqrt((x32 ** 2).mean(-1, keepdims=True) + self.eps)).astype(x.dtype)
''',
    "mxnet": '''
import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # the README's shim, before importing mxnet
from mxnet import init
from mxnet.gluon import nn


class RMSNorm(nn.HybridBlock):
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.gain = self.params.get("gain", shape=(d,), init=init.One())
        self.eps = eps

    def hybrid_forward(self, F, x, gain):
        # F is mx.nd eagerly and mx.sym once hybridized, where x has no dtype: the layer computes in its
        # parameters' dtype (Block.cast), the statistic in float32 at least (float16 squares overflow)
        dtype = np.dtype(self.gain.dtype)
        x32 = F.cast(x, "float32") if dtype == np.float16 else x
        y = F.broadcast_div(x32, F.sqrt(F.mean(F.square(x32), axis=-1, keepdims=True) + self.eps))
        return F.broadcast_mul(gain, F.cast(y, dtype.name))
''',
}


# the same in torch, and one with eps outside the square root
USER_LAYER = USER_LAYERS["torch"] + textwrap.dedent("""\


    class Broken(RMSNorm):
        def forward(self, X):
            return self.gain * X / (X.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)
""")

def user_package(root: Path, layers: str) -> Path:
    """A user's package ``mypkg`` under ``root``, its ``mypkg/layers.py`` holding ``layers``; returns ``root``."""
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "layers.py").write_text(layers)
    return root


# --- a user's git repository and the gate -------------------------------------------------------------------

def git(repo, *args) -> str:
    """``git ARGS`` in ``repo`` with a committer set; raises on failure, returns stdout."""
    return subprocess.run(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


def git_repo(repo, message="layers"):
    """``repo`` made a git repository on branch main, with everything in it committed; returns ``repo``."""
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)
    return repo


def git_branch(repo, name, change):
    """A branch ``name`` off main with ``change(repo)`` committed on it (the pull request a gate judges)."""
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-qb", name)
    change(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", name)
    return repo


# a custom-gradient function whose backward reads a helper module's constant (gradscale.FACTOR), and its binding
GRAD_LAYER = textwrap.dedent("""\
    import torch

    from gradscale import FACTOR


    class ClippedReLUGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.clamp_min(x, 0.0)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return torch.clamp(grad_output * (x > 0).to(grad_output.dtype), -1.0, 1.0) * FACTOR
""")
GRAD_BINDINGS = "bindings:\n  - {contract: clipped_relu_grad, impl: \"mylayers:ClippedReLUGrad\", framework: torch}\n"


def gate_run(repo, *args) -> subprocess.CompletedProcess:
    """The gate's run in a user's repository: its conformance/bindings.yaml, gradients and values. The harness is
    found through PYTHONPATH (this checkout) only: the change lookup must find the user's modules from the
    current directory."""
    return pytest_run("-q", "--assert=plain", "--bindings", "conformance/bindings.yaml", "--check", "gradients",
                      "--check", "values", *args, cwd=repo, env={"PYTHONPATH": str(ROOT)}, timeout=300)


# --- results documents for the report -----------------------------------------------------------------------

HOSTILE = '<img src=x onerror="window.__pwned=1">'
SCRIPT_BREAK = '</script><script>window.__pwned=2</script><!--'


def sample_rec(contract, impl, framework, check, outcome, message="", device="cpu", **extra):
    """One record of a results document."""
    return {"contract": contract, "impl": impl, "framework": framework, "device": device, "check": check,
            "outcome": outcome, "message": message,
            "nodeid": f"specs/{contract}.yaml::{contract}[{framework}-{device}]::{check}", "duration": 0.01, **extra}


def sample_doc(extra=()):
    """A small but varied results document: every status, two frameworks, a user impl, hostile text."""
    from layer_conformance import results
    ref = "layer_conformance.reference_impls.{}.{}:IMPL"
    recs = []
    for fw in ("torch", "jax"):
        for check in ("parameters", "values", "gradients"):
            recs.append(sample_rec("rmsnorm", ref.format(fw, "rmsnorm"), fw, check, "passed",
                                   details={"max_abs_error": 1e-7} if check == "values" else {}))
        recs.append(sample_rec("rmsnorm", ref.format(fw, "rmsnorm"), fw, "native", "skipped",
                               "no native layer", not_applicable=True))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "parameters", "passed"))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "values", "failed",
                           "output: mismatched elements 3 / 32; greatest absolute difference 0.5 at index (0, 1) "
                           "(got 1.5, expected 1, relative 0.5); allowed rtol=1.3e-06, atol=0.0001",
                           details={"max_abs_error": 0.5}))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "serialization", "error",
                           "cannot load mypkg.layers:Centered: ImportError: boom"))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "gradients", "failed", "gradient is wrong",
                           expected=True, expectation={"reason": "upstream bug", "link": "javascript:alert(1)",
                                                       "where": "expectations.yaml:3"}))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "values", "skipped",
                           "cuda unavailable for torch here", device="cuda", unavailable=True))
    recs.append(sample_rec("centered", "mypkg.layers:Centered", "torch", "devices", "failed", HOSTILE + SCRIPT_BREAK))
    recs += list(extra)
    env = results.environment({"torch": "2.13.0", "jax": "0.4"}, {"torch": ["cpu", "cuda"], "jax": ["cpu"]}, 7,
                              argv=["pytest", "--framework", "torch", "--impl", HOSTILE])
    return results.document(recs, env)


def sample_baseline():
    doc = json.loads(json.dumps(sample_doc()))
    for r in doc["results"]:
        if r["check"] in ("values", "devices") and r["contract"] == "centered" and r["device"] == "cpu":
            r.update(outcome="passed", message="")   # these two regressed since
        if r["check"] == "serialization":
            r.update(outcome="error")                 # failing before too
    doc["results"].append(sample_rec("centered", "mypkg.layers:Centered", "torch", "composition", "passed"))
    return doc


def gated_sample():
    """sample_doc against sample_baseline with one of each change: values' new failure newly blocks
    composition, second_order is newly skipped on its own, parameters newly passes."""
    impl = "mypkg.layers:Centered"
    doc = sample_doc([
        sample_rec("centered", impl, "torch", "composition", "blocked",
                   "not run: blocked by values (the output is wrong)", blocked_by="values"),
        sample_rec("centered", impl, "torch", "second_order", "skipped",
                   "torch cannot take this layer's second derivative"),
    ])
    base = sample_baseline()
    base["results"].append(sample_rec("centered", impl, "torch", "second_order", "passed"))
    for r in base["results"]:
        if r["check"] == "parameters" and r["contract"] == "centered":
            r.update(outcome="failed", message="a parameter is missing")
    return doc, base


BUGGY_CHECKS = ["parameters", "buffers", "composition", "serialization", "devices", "device_parity", "values",
                "native", "gradients", "strict_loading", "modes", "properties", "forward_mode", "second_order"]


def buggy_doc():
    """The issue's cell: 7 failed, 1 passed, 6 skipped (read as "FAIL 1/8" before)."""
    from layer_conformance import results
    outcomes = ["failed"] * 7 + ["passed"] + ["skipped"] * 6
    recs = [sample_rec("rmsnorm", "mypkg.layers:BuggyRMSNorm", "torch", check, outcome, f"{check} is wrong")
            for check, outcome in zip(BUGGY_CHECKS, outcomes)]
    return results.document(recs, results.environment({"torch": "2.13.0"}, {"torch": ["cpu"]}, 0))


# what --changed-since selected, as a results file's `selection` holds it (the report's tests)
SELECTION = {"changed_since": "origin/main", "merge_base": "0123456789abcdef", "by": "imports (static)",
             "changed_files": ["mypkg/layers.py", "README.md"],
             "selected": [{"contract": "centered", "impl": "mypkg.layers:Centered",
                           "because": ["mypkg/layers.py changed (the implementation's module)"]}],
             "untouched": 1, "untouched_bindings": [{"contract": "rmsnorm", "impl": "mypkg.norms:RMSNorm"}],
             "unmapped": {"README.md": "not an implementation, a contract or a module they import"}}
