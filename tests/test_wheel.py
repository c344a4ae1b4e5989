"""A normal install works: the wheel, built as a user builds it, installed alone with torch in a fresh
venv, runs the README's command against a user's own layer; an editable install reads the checkout's
contracts.

Each test builds its own venv (the wheel's takes one to two minutes, most of it unpacking torch). The test names avoid the
words that select tests for the MXNet environment (scripts/test.sh), which has no torch to install.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_LAYER = '''
import torch
from torch import nn


class RMSNorm(nn.Module):
    """A user's RMSNorm, written the way the README's example expects."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.to(torch.promote_types(x.dtype, torch.float32)).pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.gain
'''


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kw)
    return proc, proc.stdout + proc.stderr


def _clean_env():
    # nothing from this checkout or its environment may leak into the fresh venv's runs
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
           and not k.startswith(("PYTEST_XDIST", "CONFORMANCE_"))}
    return env


def _copy_checkout(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and new, not ignored): no venvs, no build leftovers."""
    try:
        names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                               capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything but environments
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".venv*", ".git", "build", "*.egg-info",
                                                                 "__pycache__", "reports"))
        return dest
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture
def fresh_venv(tmp_path):
    """The python of a new venv, isolated: it sees neither this environment nor the system's packages."""
    path = tmp_path / "venv"
    venv.create(path, with_pip=True)
    yield path / "bin" / "python"
    shutil.rmtree(path, ignore_errors=True)  # about 1 GB with torch; pytest keeps its last temp dirs


@pytest.mark.slow  # two to four minutes on two busy cores; it still runs by default
def test_wheel_in_a_fresh_venv_runs_the_readme_command(tmp_path, fresh_venv):
    src = _copy_checkout(tmp_path / "checkout")
    env = _clean_env()
    proc, out = _run([sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", src], env=env)
    assert proc.returncode == 0, out
    (wheel,) = (tmp_path / "dist").glob("layer_conformance-*.whl")

    python = fresh_venv
    # --no-compile: byte-compiling torch's files on install is most of its time, and no part of this test
    proc, out = _run([python, "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[torch]"], env=env)
    assert proc.returncode == 0, out
    proc, out = _run([python, "-c", "import harness, harness.contract as c; print(harness.__file__); "
                      "print(c.SPECS_DIR); print(' '.join(c.bundled_contracts()))"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, out
    where, specs, names = proc.stdout.splitlines()
    assert Path(where).is_relative_to(tmp_path / "venv") and Path(specs).is_relative_to(tmp_path / "venv"), out
    assert set(names.split()) == {p.stem for p in (ROOT / "specs").glob("*.yaml")}

    # the user's project: a package of their own, the README's command run from its directory
    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "layers.py").write_text(textwrap.dedent(USER_LAYER))
    pytest_cmd = tmp_path / "venv" / "bin" / "pytest"
    proc, out = _run([pytest_cmd, "-p", "no:cacheprovider", "--contract", "rmsnorm", "--impl",
                      "mypkg.layers:RMSNorm", "--conformance-json", "out.json"], env=env, cwd=project)
    assert proc.returncode == 0, out
    results = json.loads((project / "out.json").read_text())["results"]
    outcomes = {r["check"]: r["outcome"] for r in results}
    assert {r["contract"] for r in results} == {"rmsnorm"} and {r["framework"] for r in results} == {"torch"}
    for check in ("parameters", "serialization", "values", "native", "gradients", "properties"):
        assert outcomes.get(check) == "passed", (check, outcomes, out)
    assert "failed" not in outcomes.values() and "error" not in outcomes.values(), outcomes
    assert all(r["nodeid"].endswith(f"rmsnorm[RMSNorm-torch-cpu{'-' + r['dtype'] if r.get('dtype') else ''}]::"
                                    f"{r['check']}") for r in results), results
    assert {r.get("dtype") for r in results} == {None, "bfloat16", "float16", "float64"}  # the contract's dtypes

    # a name that is no bundled contract: a usage error that says what to do
    proc, out = _run([pytest_cmd, "-p", "no:cacheprovider", "--contract", "nosuch", "--impl",
                      "mypkg.layers:RMSNorm"], env=env, cwd=project)
    assert proc.returncode == 4, out
    assert "no bundled contract named 'nosuch'" in out and "rmsnorm" in out and "Traceback" not in out
    assert "path to a contract of your own (a YAML file" in out, out


def test_editable_install_reads_the_checkout_specs(tmp_path, fresh_venv):
    src = _copy_checkout(tmp_path / "checkout")
    env = _clean_env()
    python = fresh_venv
    proc, out = _run([python, "-m", "pip", "install", "-q", "--no-compile", "-e", src], env=env)
    assert proc.returncode == 0, out
    proc, out = _run([python, "-c", "import harness.contract as c; print(c.SPECS_DIR); "
                      "print(' '.join(c.bundled_contracts()))"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, out
    specs, names = proc.stdout.splitlines()
    assert Path(specs) == src / "specs", out
    assert set(names.split()) == {p.stem for p in (ROOT / "specs").glob("*.yaml")}
