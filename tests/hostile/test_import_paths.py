"""Files in the user's tree named like modules the judge, a zygote or a framework imports (the issue: a numpy.py
in the checkout ran inside the judge; a sympy.py changed torch.nn.RMSNorm in the process that runs `native`), and
the gate's trusted-tree mode (--untrusted-tree PATH). Run the user's way: `python -m pytest` in a directory of
their own, a subprocess; --sandbox off, so that a planted module could write its marker wherever it ran."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import ROOT, USER_LAYER, USER_LAYERS, executor_pythons, pytest_run

# a module that stands aside for the real one wherever it is imported, and says where it ran (in a file beside it)
PLANTED = textwrap.dedent('''\
    import importlib, os, sys
    _here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(_here, "PLANTED_RAN"), "a") as f:
        f.write(f"{__name__} in {' '.join(sys.argv)[:200]} (pid {os.getpid()})\\n")
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _here]
    del sys.modules[__name__]
    sys.modules[__name__] = importlib.import_module(__name__)
''')

# a sympy.py that makes torch's own RMSNorm put eps outside the square root, as USER_LAYER's Broken does: where
# the process that runs `native` imports it, the broken layer agrees with the "native" layer
SYMPY = PLANTED + textwrap.dedent('''\
    try:
        import torch
        def _forward(self, x):
            return self.weight * x / (x.pow(2).mean(-1, keepdim=True).sqrt() + (self.eps or 1e-6))
        torch.nn.RMSNorm.forward = _forward
    except Exception:
        pass
''')


def _run(cwd, *args):
    out = Path(cwd) / "results.json"
    proc = pytest_run("-q", "-n", "0", "--sandbox", "off", f"--conformance-json={out}", *args, cwd=cwd, timeout=600)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, proc.stdout + proc.stderr, records


def test_a_numpy_py_in_the_user_directory_refuses_the_run(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "mylayer.py").write_text(USER_LAYER)
    (tmp_path / "numpy.py").write_text(PLANTED)
    proc, said, records = _run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--framework", "torch",
                               "--check", "values", "--dtype", "float32")
    assert proc.returncode == 4, said[-3000:]
    assert str(tmp_path / "numpy.py") in said, said[-3000:]
    assert not (tmp_path / "PLANTED_RAN").exists(), (tmp_path / "PLANTED_RAN").read_text()
    assert not records


def test_a_package_on_pythonpath_shadowing_a_framework_refuses_the_run(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "mylayer.py").write_text(USER_LAYER)
    (tmp_path / "src" / "torch").mkdir(parents=True)
    # a package that stands aside for the real torch (its marker lands in src/)
    (tmp_path / "src" / "torch" / "__init__.py").write_text(PLANTED.replace(
        "os.path.dirname(os.path.abspath(__file__))", "os.path.dirname(os.path.dirname(os.path.abspath(__file__)))"))
    (tmp_path / "src" / "data").mkdir()   # a directory of that kind with no module in it is no problem
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", "--sandbox", "off",
                           "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--framework", "torch", "--check",
                           "values"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              filter(None, [str(tmp_path / "src"), os.environ.get("PYTHONPATH")]))})
    said = proc.stdout + proc.stderr
    assert proc.returncode == 4, said[-3000:]
    assert str(tmp_path / "src" / "torch") in said, said[-3000:]
    assert not (tmp_path / "src" / "PLANTED_RAN").exists(), (tmp_path / "src" / "PLANTED_RAN").read_text()


def test_a_sympy_py_never_reaches_native(tmp_path):
    """The zygote preloads sympy; it put the judge's sys.path (the user's directory first) before its own. Now
    the file is refused beside the run, and under --untrusted-tree it is imported by no process."""
    pytest.importorskip("torch")
    (tmp_path / "mylayer.py").write_text(USER_LAYER)
    (tmp_path / "sympy.py").write_text(SYMPY)
    proc, said, records = _run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:Broken", "--framework", "torch",
                               "--check", "native", "--dtype", "float32")
    assert proc.returncode == 4 and str(tmp_path / "sympy.py") in said, said[-3000:]
    assert not (tmp_path / "PLANTED_RAN").exists(), (tmp_path / "PLANTED_RAN").read_text()

    base, tree = tmp_path / "base", tmp_path / "base" / "pr"
    tree.mkdir(parents=True)
    (tree / "mylayer.py").write_text(USER_LAYER)
    (tree / "sympy.py").write_text(SYMPY)
    proc, said, records = _run(base, "--untrusted-tree", "pr", "--contract", "rmsnorm", "--impl", "mylayer:Broken",
                               "--framework", "torch", "--check", "native", "--dtype", "float32")
    native = [r for r in records if r["check"] == "native"]
    assert not (tree / "PLANTED_RAN").exists(), (tree / "PLANTED_RAN").read_text()
    assert proc.returncode == 1 and native and all(r["outcome"] == "failed" for r in native), said[-3000:]


def test_untrusted_tree_imports_the_layer_from_it_and_never_its_conftest(tmp_path):
    pytest.importorskip("torch")
    base, tree = tmp_path / "base", tmp_path / "base" / "pr"
    tree.mkdir(parents=True)
    # the trusted checkout's layer is correct; the pull request's puts eps outside the square root
    (base / "mylayer.py").write_text(USER_LAYER)
    (tree / "mylayer.py").write_text(USER_LAYER + "\nRMSNorm = Broken\n")
    marker = tmp_path / "CONFTEST_LOADED"
    hostile = f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n"
    (tree / "conftest.py").write_text(hostile)
    (tree / "tests").mkdir()
    (tree / "tests" / "conftest.py").write_text(hostile)
    (tree / "numpy.py").write_text(PLANTED)   # in the tree under test, after the interpreter's own: never imported
    proc, said, records = _run(base, "--untrusted-tree", str(tree), "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm",
                               "--framework", "torch", "--check", "values", "--dtype", "float32")
    assert not marker.exists(), marker.read_text()
    assert not (tree / "PLANTED_RAN").exists(), (tree / "PLANTED_RAN").read_text()
    values = [r for r in records if r["check"] == "values"]
    assert proc.returncode == 1 and values and values[0]["outcome"] == "failed", said[-3000:]

    # a bare run from the trusted checkout (its rootdir holds the tree): the tree's conftest.py is still never read
    (base / "pyproject.toml").write_text('[tool.pytest.ini_options]\nconformance_contract = ["rmsnorm"]\n'
                                         'conformance_impl = "mylayer:RMSNorm"\n')
    proc = pytest_run("-q", "-n", "0", "--sandbox", "off", "--untrusted-tree", "pr", "--framework", "torch",
                      "--check", "values", "--dtype", "float32", "pr/tests", cwd=base, timeout=600)
    assert proc.returncode == 4 and "inside it" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert not marker.exists(), marker.read_text()


@pytest.mark.slow   # builds (or reuses) the [torch] wheel's venv: minutes the first time
def test_an_executor_python_imports_its_own_numpy_when_the_judge_is_a_wheel_install(tmp_path):
    """The README's route: the harness installed from its wheel in a numpy 2 venv, MXNet's executors in an
    environment of their own. The executors put the judge's site-packages (where the wheel lies, numpy 2 beside
    it) before their own, and every MXNet check errored."""
    mxnet = executor_pythons("mxnet")["mxnet"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
           and not k.startswith(("PYTEST_", "CONFORMANCE_"))}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "wheel-envs.sh"), "torch"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 and ("No matching distribution found" in said or "Could not find a version" in said):
        pytest.skip("the [torch] wheel's venv cannot be built here: pip cannot reach its packages")
    assert proc.returncode == 0, said[-3000:]
    python = ROOT / proc.stdout.split()[-1]
    # the layer refuses to import where any of the judge's environment is on its executor's sys.path
    judge = os.path.realpath(python.parent.parent) + os.sep
    (tmp_path / "mylayer.py").write_text(textwrap.dedent(f"""\
        import os as _os, sys as _sys
        _judge = [p for p in _sys.path if (_os.path.realpath(p or ".") + _os.sep).startswith({judge!r})]
        if _judge:
            raise ImportError(f"the judge's environment on the executor's sys.path: {{_judge}}")
        """) + USER_LAYERS["mxnet"])
    proc = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "--contract", "rmsnorm", "--impl",
                           "mylayer:RMSNorm", "--framework", "mxnet", "--executor-python", f"mxnet={mxnet}", "--check",
                           "values", "--conformance-json", "out.json"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    records = json.loads((tmp_path / "out.json").read_text())["results"]
    values = [r for r in records if r["check"] == "values"]
    assert any(r["outcome"] == "passed" for r in values), said[-3000:]
    assert not [r for r in values if r["outcome"] in ("failed", "error", "blocked")], said[-3000:]


# --- the list of names: what a file beside the run may not be called --------------------------------------------

def test_shadows_lists_modules_and_packages_named_like_the_list_and_nothing_else(tmp_path):
    from layer_conformance.import_paths import shadows
    for name in ("numpy.py", "yaml.cpython-311-x86_64-linux-gnu.so", "mylayer.py", "numpy_utils.py", "torch.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "sympy").mkdir()   # no __init__.py: a namespace portion, which an installed package wins over
    assert shadows(dirs=[str(tmp_path)]) == [str(tmp_path / n) for n in
                                             ("numpy.py", "torch", "yaml.cpython-311-x86_64-linux-gnu.so")]


def test_the_list_covers_every_module_the_judge_imports_before_user_code():
    from layer_conformance.import_paths import SHADOWED
    from layer_conformance.plugin import GUARDED, JUDGE_MODULES
    tops = {n.partition(".")[0] for n in [*JUDGE_MODULES, *GUARDED]} - set(sys.stdlib_module_names)
    assert not tops - SHADOWED, sorted(tops - SHADOWED)


ZYGOTE_IMPORTS = textwrap.dedent('''\
    import sys
    from layer_conformance.layerside import server
    server._preload(sys.argv[1])
    for name in server._when_idle(sys.argv[1]):
        server._import_idle(name)
    print(" ".join(sorted({m.partition(".")[0] for m in sys.modules})))
''')


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax", "mxnet"])
def test_the_list_covers_every_module_a_zygote_imports(framework, tmp_path):
    """What a zygote imports (its framework and the modules its adapter preloads, at once and while idle), in the
    Python that runs it: a file of any of these names beside the run is refused."""
    from layer_conformance.import_paths import SHADOWED
    python = executor_pythons(framework).get(framework, sys.executable)
    proc = subprocess.run([python, "-c", ZYGOTE_IMPORTS, framework], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tops = {n for n in proc.stdout.split() if n.isidentifier() and not n.startswith("_")}
    missing = tops - SHADOWED - set(sys.stdlib_module_names) - {"cython_runtime"}
    assert not missing, sorted(missing)
