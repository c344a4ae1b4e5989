"""A normal install works: the wheel, built as a user builds it, installed with one extra alone into a venv
of its own (scripts/wheel-envs.sh: [torch], [tensorflow], [jax], [mxnet], and [torch] on the oldest versions the
metadata admits), runs the README's command from a user's own directory against the user's own correct layer,
which passes every default check; an editable install reads the checkout's contracts.

The venvs are cached outside the checkout (scripts/wheel-envs.sh says where; CI builds them before the tests:
.ci/run); the first build takes minutes.
A venv whose packages pip cannot reach from here is skipped with pip's reason. The test names avoid the words
that select tests for the MXNet environment (scripts/test.sh), which runs none of this file.
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

from tests.support import USER_LAYERS

ROOT = Path(__file__).resolve().parent.parent

# the default checks a correct layer passes in its cases' own dtype; a framework without the mechanism has the
# check n/a, for the reason given here (read from the record), and passes every other
OWN_DTYPE_CHECKS = ("parameters", "serialization", "values", "native", "gradients", "properties", "compiled",
                    "export")
NOT_APPLICABLE = {"mxnet": {"native": "gluon.nn 1.9.1 has no RMSNorm"}}
# the Keras layer reads its width from the input in build(): the run drops the contract's d, as the README says
BINDING_ARGS = {"tensorflow": ["--arg-map", "d="]}
# pip's words for a package it cannot reach from here (no index, no network): the venv cannot be built here
UNREACHABLE = ("No matching distribution found", "Could not find a version that satisfies")


def _run(cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kw)
    return proc, proc.stdout + proc.stderr


def _clean_env():
    # nothing from this checkout or its environment may leak into the fresh venv's runs
    env = {k: v for k, v in os.environ.items()
           # (CI, BUILD_NUMBER: pytest prints its short summary uncut there, unlike a user's terminal)
           # (PYTHONDONTWRITEBYTECODE: a user's venv keeps the bytecode of what it imported, so a run after the
           # first does not compile the framework from source again)
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "CI",
                        "BUILD_NUMBER", "PYTHONDONTWRITEBYTECODE")
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


def _wheel_venv(name: str) -> Path:
    """The single-extra venv ``name`` (scripts/wheel-envs.sh builds it, or finds it up to date)."""
    proc, out = _run(["bash", ROOT / "scripts" / "wheel-envs.sh", name], env=_clean_env(), cwd=ROOT)
    if proc.returncode != 0 and any(words in out for words in UNREACHABLE):
        pytest.skip(f"the {name} venv cannot be built here, pip cannot reach its packages: "
                    f"{next(line for line in out.splitlines() if any(w in line for w in UNREACHABLE))}")
    assert proc.returncode == 0, out
    return ROOT / proc.stdout.split()[-1]  # absolute where the cache is (ROOT / an absolute path is that path)


@pytest.mark.slow  # minutes for a venv's first build; a cached one takes a minute (the run itself)
@pytest.mark.parametrize("name", ["torch", "tensorflow", "jax", "mxnet", "torch-oldest"])
def test_one_extra_alone_passes_a_correct_layer(tmp_path, name):
    python = _wheel_venv(name)
    framework = name.split("-")[0]
    env = _clean_env()
    proc, out = _run([python, "-c", "import layer_conformance, layer_conformance.contract as c; print(layer_conformance.__file__); "
                      "print(c.SPECS_DIR); print(' '.join(c.bundled_contracts()))"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, out
    where, specs, names = proc.stdout.splitlines()
    venv = python.parent.parent
    assert Path(where).is_relative_to(venv) and Path(specs).is_relative_to(venv), out
    assert set(names.split()) == {p.stem for p in (ROOT / "specs").glob("*.yaml")}

    # nothing of the repository's folder names is installed at the top level
    proc, out = _run([python, "-c", "import importlib.util as u; print([n for n in ('harness', 'reference_impls', "
                      "'specs') if u.find_spec(n)])"], env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", out

    # the user's project: a module of their own, and folders named like the repository's (which the installed
    # package must never import), the README's command run from its directory with `python -m pytest`, which
    # puts that directory first on sys.path
    project = tmp_path / "project"
    project.mkdir()
    (project / "mylayer.py").write_text(textwrap.dedent(USER_LAYERS[framework]))
    for folder in ("harness", "reference_impls"):
        (project / folder).mkdir()
        (project / folder / "__init__.py").write_text(f"raise ImportError('the project\\'s own {folder} was imported')\n")
    (project / "harness" / "plugin.py").write_text("raise ImportError('the project\\'s own harness.plugin')\n")
    pytest_cmd = python.parent / "pytest"
    proc, out = _run([python, "-m", "pytest", "-p", "no:cacheprovider", "--contract", "rmsnorm", "--impl",
                      "mylayer:RMSNorm", *BINDING_ARGS.get(framework, []), "--conformance-json", "out.json"],
                     env=env, cwd=project)
    assert "own harness" not in out and "own reference_impls" not in out, out
    assert proc.returncode == 0, out
    results = json.loads((project / "out.json").read_text())["results"]
    assert {r["contract"] for r in results} == {"rmsnorm"} and {r["framework"] for r in results} == {framework}
    own = {r["check"]: r for r in results if not r.get("dtype")}  # the cases' own dtype
    not_applicable = NOT_APPLICABLE.get(framework, {})
    for check in OWN_DTYPE_CHECKS:
        record = own.get(check, {})
        if check in not_applicable:
            assert record.get("outcome") == "skipped" and record.get("not_applicable") \
                and not_applicable[check] in record["message"], (check, record, out)
        else:
            assert record.get("outcome") == "passed", (check, record, out)
    assert not [r for r in results if r["outcome"] in ("failed", "error", "blocked")], out
    assert all(r["nodeid"].endswith(f"rmsnorm[RMSNorm-{framework}-cpu{'-' + r['dtype'] if r.get('dtype') else ''}]::"
                                    f"{r['check']}") for r in results), results

    # a name that is no bundled contract: a usage error that says what to do
    proc, out = _run([pytest_cmd, "-p", "no:cacheprovider", "--contract", "nosuch", "--impl",
                      "mylayer:RMSNorm"], env=env, cwd=project)
    assert proc.returncode == 4, out
    assert "no bundled contract named 'nosuch'" in out and "rmsnorm" in out and "Traceback" not in out
    assert "path to a contract of your own (a YAML file" in out, out


def test_editable_install_reads_the_checkout_specs(tmp_path, fresh_venv):
    src = _copy_checkout(tmp_path / "checkout")
    env = _clean_env()
    python = fresh_venv
    proc, out = _run([python, "-m", "pip", "install", "-q", "--no-compile", "-e", src], env=env)
    assert proc.returncode == 0, out
    proc, out = _run([python, "-c", "import layer_conformance.contract as c; print(c.SPECS_DIR); "
                      "print(' '.join(c.bundled_contracts()))"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, out
    specs, names = proc.stdout.splitlines()
    assert Path(specs) == src / "specs", out
    assert set(names.split()) == {p.stem for p in (ROOT / "specs").glob("*.yaml")}
