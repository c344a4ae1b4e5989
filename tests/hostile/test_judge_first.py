"""The judge before user code (issue 29, points 1 and 2): everything the judge may import is imported before any
layer code runs, detection included, and never from the current directory; the contracts, bindings and
expectations are read and hashed before the first user import, and a file that changed under the run refuses it
(exit 4). Run the user's way: a directory of their own, `python -m pytest` in it, a subprocess."""
import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from layer_conformance.contract import bundled_contracts
from tests.support import pytest_run

HARNESS = Path(__file__).resolve().parents[2] / "harness"

# a module that, imported in the judge, makes every record pass and the gate's verdict 0 (and says so in a file);
# imported anywhere else (an executor) it stands aside for the real one
PLANTED = textwrap.dedent('''\
    import importlib, os, sys
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != _here]
    del sys.modules[__name__]
    sys.modules[__name__] = importlib.import_module(__name__)
    if "layer_conformance.plugin" in sys.modules:
        with open(os.path.join(_here, "PLANTED_IN_JUDGE"), "a") as f:
            f.write(__name__ + "\\n")
        from layer_conformance import results
        _document = results.document
        def _passed(records, *a, **k):
            for r in records:
                r.outcome = "passed"
            return _document(records, *a, **k)
        results.document = _passed
        try:
            from layer_conformance.gate import hooks
            hooks._verdict = lambda *a, **k: 0
        except Exception:
            pass
''')

# RMSNorm with eps outside the square root: the edge_rows case (mean square comparable to eps) tells
LAYER = textwrap.dedent('''\
    import os
    import torch
    from torch import nn

    PLANTED = {planted!r}
    WHERE = {where!r}

    def plant():
        if not PLANTED:
            return
        for where in {{WHERE, os.getcwd()}}:
            for name in ("ml_dtypes", "jinja2", "markupsafe"):
                try:
                    with open(os.path.join(where, name + ".py"), "w") as f:
                        f.write(PLANTED)
                except OSError:
                    pass

    plant()

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.gain = nn.Parameter(torch.ones(d))
            self.eps = eps

        def forward(self, x):
            plant()
            ms = x.float().pow(2).mean(-1, keepdim=True)
            return (self.gain * x / (ms.sqrt() + self.eps)).to(x.dtype)
''')


def _pytest(cwd, *args):
    out = cwd / "results.json"
    # --sandbox off: these defences hold without one (a sandbox makes the project read-only, so the layer's
    # writes would fail before the judge's defence is reached)
    proc = pytest_run("-q", "-n", "0", "--sandbox", "off", f"--conformance-json={out}", *args, cwd=cwd, timeout=600)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, records


def test_a_module_planted_in_the_current_directory_is_never_imported_by_the_judge(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    (tmp_path / "mylayer.py").write_text(LAYER.format(planted=PLANTED, where=str(tmp_path)))
    proc, records = _pytest(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--check", "values",
                            "--dtype", "bfloat16", "--conformance-html", "report.html")
    said = proc.stdout + proc.stderr
    assert (tmp_path / "ml_dtypes.py").exists() and (tmp_path / "jinja2.py").exists()   # the layer did plant them
    assert not (tmp_path / "PLANTED_IN_JUDGE").exists(), said[-3000:]
    assert proc.returncode == 1, said[-3000:]       # the real verdict: eps outside the square root fails
    assert records and any(r["outcome"] == "failed" for r in records), records
    assert any(r.get("dtype") == "bfloat16" for r in records), records   # a bfloat16 row was decoded
    assert (tmp_path / "report.html").exists()


def test_the_judge_imports_from_the_installation_only(tmp_path):
    """In a judge process: a guarded name found only in the current directory is refused; one the
    installation has comes from the installation, whatever the current directory holds."""
    (tmp_path / "markupsafe.py").write_text("raise SystemExit('planted')\n")
    (tmp_path / "tomllib.py").write_text("raise SystemExit('planted')\n")
    (tmp_path / "hypothesis.py").write_text("raise SystemExit('planted')\n")
    script = textwrap.dedent("""\
        import os, sys
        sys.path.insert(0, os.getcwd())
        for name in ("markupsafe", "tomllib", "hypothesis"):
            sys.modules.pop(name, None)
        from layer_conformance.plugin import JudgeImportGuard
        sys.meta_path.insert(0, JudgeImportGuard())
        import tomllib
        assert not tomllib.__file__.startswith(os.getcwd()), tomllib.__file__
        try:
            import hypothesis
        except ImportError as exc:
            assert "refused" in str(exc) and "hypothesis.py" in str(exc), exc
        else:
            assert not hypothesis.__file__.startswith(os.getcwd()), hypothesis.__file__
        import mine   # the user's own module beside the run: not a name the judge imports
        print("ok")
    """)
    (tmp_path / "mine.py").write_text("")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr


def _lazy_imports() -> set[str]:
    """Every module a judge module imports inside a function (layerside/, the adapters and the executor's server,
    runs elsewhere; the command line's modules run no judge)."""
    names = set()
    for f in sorted(HARNESS.rglob("*.py")):
        rel = f.relative_to(HARNESS).as_posix()
        # the command line's own modules (cli.py; `new`'s scaffold.py and scaffold_text.py) run no judge
        if rel.startswith(("layerside/", "reference_impls/")) or rel in ("__main__.py", "cli.py", "scaffold.py",
                                                                         "scaffold_text.py"):
            continue
        package = ["layer_conformance", *rel.split("/")[:-1]]
        for fn in ast.walk(ast.parse(f.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names.add(node.module)
                elif isinstance(node, ast.ImportFrom):
                    base = package[:len(package) - (node.level - 1)]
                    names.add(".".join(base + ([node.module] if node.module else [])))
    return names


def test_every_lazy_import_of_the_judge_is_imported_before_user_code():
    from layer_conformance.plugin import JUDGE_MODULES
    skip = {"layer_conformance", "sys", "os", "pathlib", "importlib", "numpy", "layer_conformance.boundary.sandbox"}
    missing = sorted(n for n in _lazy_imports() - skip - set(JUDGE_MODULES)
                     if not n.startswith("layer_conformance.checks.") or n.count(".") > 2)
    checks = {n for n in _lazy_imports() if n.startswith("layer_conformance.checks.")} - set(JUDGE_MODULES)
    assert not missing and not checks, f"imported lazily by the judge, not in JUDGE_MODULES: {missing + sorted(checks)}"


def test_a_contract_the_layer_edits_at_import_is_refused(tmp_path):
    pytest.importorskip("torch")
    contract = tmp_path / "my_rmsnorm.yaml"
    shutil.copy(bundled_contracts()["rmsnorm"], contract)
    layer = LAYER.format(planted="", where=str(tmp_path)).replace("plant()\n\nclass", textwrap.dedent(f"""\
        with open({str(contract)!r}, "a") as f:   # (an attacker finds it in /proc/<ppid>/cmdline)
            f.write("\\nchecks: {{values: {{skip: x}}}}\\n")

        class"""))
    (tmp_path / "mylayer.py").write_text(layer)
    proc, records = _pytest(tmp_path, "--contract", str(contract), "--impl", "mylayer:RMSNorm", "--check", "values",
                            "--dtype", "float32")   # no --framework: detection imports the layer first
    said = proc.stdout + proc.stderr
    assert "checks: {values: {skip: x}}" in contract.read_text()   # the layer did edit it
    assert proc.returncode == 4, said[-3000:]
    assert f"{contract}" in said and "changed during the run" in said, said[-3000:]
    assert not any(r["outcome"] == "skipped" and r["check"] == "values" for r in records), records
