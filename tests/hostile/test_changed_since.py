"""``--changed-since`` blind spots: a change that reaches a layer only through a dynamic import, a data file it
reads, or the target of a symbolic link it imports selected no binding (the static import scan cannot see it),
and the gate said "no layer changed" while a full run failed. With ``--baseline`` a binding is now also selected
by the files its processes were seen to load in the baseline run (the results file's `loaded_files`).

Each case: a git repository with a correct torch RMSNorm that uses the mechanism, a baseline run, then a commit
that breaks the layer through that mechanism alone. Without --baseline (the static scan alone) the gate passes
with "no layer changed": the hole is real. With it the binding is selected, says why, and fails. Run through the
public command line, from the project's directory."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

BINDINGS = 'bindings:\n  - {contract: rmsnorm, impl: "mylayer:RMSNorm", framework: torch}\n'

# the layer, with FACTOR_SOURCE: how it gets the factor its output is multiplied by (1.0 is right)
LAYER = """\
import torch
from torch import nn
{imports}

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, X):
        rms = X.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return self.gain * X * rms * {factor}
"""

DYNAMIC = LAYER.format(imports=textwrap.dedent("""\
    import importlib

    PART = "scale"
    _part = importlib.import_module("parts." + PART)  # a name no static scan can read
    """), factor="_part.FACTOR")

DATA = LAYER.format(imports=textwrap.dedent("""\
    import json
    import os

    HERE = os.path.dirname(os.path.abspath(__file__))


    def _factor():
        with open(os.path.join(HERE, "data", "scale.json")) as f:  # read in forward: during a check
            return json.load(f)["scale"]
    """), factor="_factor()")

SYMLINKED = LAYER.format(imports="from mymod import FACTOR  # mymod.py is a symbolic link to shared/factor.py\n",
                         factor="FACTOR")


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout


def _pytest(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--assert=plain",
           "--bindings", "conformance/bindings.yaml", "--check", "values", "--dtype", "float32", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return proc, proc.stdout + proc.stderr


def _project(root: Path, files: dict, links: dict = ()) -> Path:
    """A committed git project: ``files`` (path -> text), ``links`` (path -> target), the binding."""
    repo = root / "project"
    for path, text in {**files, "conformance/bindings.yaml": BINDINGS,
                       ".gitignore": "__pycache__/\nbase.json\nout/\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    for path, target in dict(links).items():
        os.symlink(target, repo / path)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "a correct layer")
    return repo


def _baseline(repo):
    proc, out = _pytest(repo, "--conformance-json", "base.json")
    assert proc.returncode == 0, out[-3000:]
    return json.loads((repo / "base.json").read_text())


def _commit(repo, path, text):
    (repo / path).write_text(text)
    _git(repo, "commit", "-qam", f"change {path}")


def _gate(repo, *args):
    proc, out = _pytest(repo, "--changed-since", "HEAD~1", "--conformance-json", "out/r.json", *args)
    return proc, out, json.loads((repo / "out" / "r.json").read_text())


def _assert_static_scan_misses_it(repo, changed):
    proc, out, doc = _gate(repo)
    assert proc.returncode == 0, out[-3000:]
    assert "no layer changed since HEAD~1" in proc.stdout, out[-3000:]
    sel = doc["selection"]
    assert sel["by"] == "imports (static)" and sel["selected"] == [] and changed in sel["unmapped"], sel


def _assert_selected_and_failing(repo, because):
    proc, out, doc = _gate(repo, "--baseline", "base.json")
    assert proc.returncode == 1, out[-3000:]
    assert f"  rmsnorm mylayer:RMSNorm: {because}" in proc.stdout, out[-3000:]
    sel = doc["selection"]
    assert sel["by"] == "imports (static) + files loaded in the baseline run", sel
    assert sel["selected"] == [{"contract": "rmsnorm", "impl": "mylayer:RMSNorm", "because": [because]}], sel
    assert sel["unmapped"] == {}, sel
    assert [r["outcome"] for r in doc["results"]] == ["failed"], doc["results"]


def _loaded(doc):
    (entry,) = doc["loaded_files"]
    assert (entry["contract"], entry["impl"], entry["framework"]) == ("rmsnorm", "mylayer:RMSNorm", "torch")
    return entry["files"]


def test_a_dynamically_imported_module_that_changed_selects_the_binding(tmp_path):
    repo = _project(tmp_path, {"mylayer.py": DYNAMIC, "parts/__init__.py": "", "parts/scale.py": "FACTOR = 1.0\n"})
    # seen at import (op_load): the package and the module no import statement names
    assert {"mylayer.py", "parts/__init__.py", "parts/scale.py"} <= set(_loaded(_baseline(repo)))
    _commit(repo, "parts/scale.py", "FACTOR = 2.0  # doubled\n")
    _assert_static_scan_misses_it(repo, "parts/scale.py")
    _assert_selected_and_failing(repo, "parts/scale.py changed (read by the layer in the baseline run)")


def test_a_data_file_the_layer_reads_that_changed_selects_the_binding(tmp_path):
    repo = _project(tmp_path, {"mylayer.py": DATA, "data/scale.json": '{"scale": 1.0}\n'})
    # seen during a check (forward): not only imports count
    assert "data/scale.json" in _loaded(_baseline(repo))
    _commit(repo, "data/scale.json", '{"scale": 2.0}\n')
    _assert_static_scan_misses_it(repo, "data/scale.json")
    _assert_selected_and_failing(repo, "data/scale.json changed (read by the layer in the baseline run)")


def test_the_changed_target_of_a_symlinked_module_selects_the_binding(tmp_path):
    repo = _project(tmp_path, {"mylayer.py": SYMLINKED, "shared/factor.py": "FACTOR = 1.0\n"},
                    links={"mymod.py": "shared/factor.py"})
    # the path imported and the file it leads to: git names whichever changed
    assert {"mymod.py", "shared/factor.py"} <= set(_loaded(_baseline(repo)))
    _commit(repo, "shared/factor.py", "FACTOR = 2.0  # doubled\n")
    _assert_static_scan_misses_it(repo, "shared/factor.py")
    _assert_selected_and_failing(repo, "shared/factor.py changed (read by the layer in the baseline run)")


def test_a_binding_the_baseline_has_no_record_of_is_selected(tmp_path):
    repo = _project(tmp_path, {"mylayer.py": DATA, "data/scale.json": '{"scale": 1.0}\n', "README.md": "# x\n"})
    # a baseline without `loaded_files` (written before they were recorded; or the binding never loaded there)
    (repo / "base.json").write_text(json.dumps({"schema_version": 3, "results": []}))
    _commit(repo, "README.md", "# x\n\nmore words\n")
    _assert_static_scan_misses_it(repo, "README.md")
    proc, out, doc = _gate(repo, "--baseline", "base.json")
    assert proc.returncode == 0, out[-3000:]   # selected and run: the layer is right
    assert "  rmsnorm mylayer:RMSNorm: the baseline has no record of what it loaded" in proc.stdout, out[-3000:]
    assert [s["because"] for s in doc["selection"]["selected"]] == [["the baseline has no record of what it loaded"]]
    assert doc["selection"]["unmapped"] == {"README.md": doc["selection"]["unmapped"]["README.md"]}
    assert [r["outcome"] for r in doc["results"]] == ["passed"], doc["results"]
