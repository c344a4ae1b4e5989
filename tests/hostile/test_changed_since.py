"""``--changed-since`` blind spots: a change that reaches a layer only through a dynamic import, a data file it
reads, or the target of a symbolic link it imports selected no binding (the static import scan cannot see it),
and the gate said "no layer changed" while a full run failed. With ``--baseline`` a binding is now also selected
by the files its processes were seen to load in the baseline run (the results file's `loaded_files`), the files
they map or hold open at the end of each check among them (weights mmap'd by safetensors or torch.from_file, in
C: no audit event). Without a baseline, a changed data file under a directory a binding imports a module from
selects it (the directory rule), unless ``--changed-since-ignore GLOB`` (or the ini key) leaves it out.

Each case: a git repository with a correct torch RMSNorm that uses the mechanism, a baseline run, then a commit
that breaks the layer through that mechanism alone. Without --baseline (the static scan alone) the gate passes
with "no layer changed": the hole is real. With it the binding is selected, says why, and fails. Run through the
public command line, from the project's directory."""
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import git, git_repo, torch_rmsnorm

pytest.importorskip("torch")

BINDINGS = 'bindings:\n  - {contract: rmsnorm, impl: "mylayer:RMSNorm", framework: torch}\n'

# the layer gets the factor its output is multiplied by (1.0 is right) through the mechanism under test
DYNAMIC = torch_rmsnorm(preamble=textwrap.dedent("""\
    import importlib

    PART = "scale"
    _part = importlib.import_module("parts." + PART)  # a name no static scan can read
    """), factor="_part.FACTOR")

DATA = torch_rmsnorm(preamble=textwrap.dedent("""\
    import json
    import os

    HERE = os.path.dirname(os.path.abspath(__file__))


    def _factor():
        with open(os.path.join(HERE, "data", "scale.json")) as f:  # read in forward: during a check
            return json.load(f)["scale"]
    """), factor="_factor()")

# weights mapped from C at import and kept mapped (the tensors are views of the mapping): no audit event
MAPPED = {
    "safetensors": (torch_rmsnorm(preamble=textwrap.dedent("""\
        import os

        from safetensors.torch import load_file

        WEIGHTS = load_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights", "scale.safetensors"))
        """), factor='WEIGHTS["scale"]'), "weights/scale.safetensors"),
    "torch.from_file": (torch_rmsnorm(preamble=textwrap.dedent("""\
        import os

        SCALE = torch.from_file(os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights", "scale.f32"),
                                shared=False, size=1, dtype=torch.float32)
        """), factor="SCALE"), "weights/scale.f32"),
}


def _weights(name: str, scale: float) -> bytes:
    """The file a MAPPED layer reads its factor from: a safetensors file (its format written out: nothing imported
    here), or the float32 alone."""
    data = struct.pack("<f", scale)
    if not name.endswith(".safetensors"):
        return data
    header = json.dumps({"scale": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


SYMLINKED = torch_rmsnorm(preamble="from mymod import FACTOR  # mymod.py is a symbolic link to shared/factor.py\n",
                         factor="FACTOR")


def _pytest(cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--assert=plain",
           "--bindings", "conformance/bindings.yaml", "--check", "values", "--dtype", "float32", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return proc, proc.stdout + proc.stderr


def _project(root: Path, files: dict, links: dict = (), bindings: str = BINDINGS) -> Path:
    """A committed git project: ``files`` (path -> text, or bytes), ``links`` (path -> target), the binding."""
    repo = root / "project"
    for path, text in {**files, "conformance/bindings.yaml": bindings,
                       ".gitignore": "__pycache__/\nbase.json\nout/\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (repo / path).write_bytes(text)
        else:
            (repo / path).write_text(text)
    for path, target in dict(links).items():
        os.symlink(target, repo / path)
    return git_repo(repo, "a correct layer")


def _baseline(repo):
    proc, out = _pytest(repo, "--conformance-json", "base.json")
    assert proc.returncode == 0, out[-3000:]
    return json.loads((repo / "base.json").read_text())


def _commit(repo, path, text):
    if isinstance(text, bytes):
        (repo / path).write_bytes(text)
    else:
        (repo / path).write_text(text)
    git(repo, "commit", "-qam", f"change {path}")


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


@pytest.mark.parametrize("loader", sorted(MAPPED))
def test_weights_mapped_by_native_code_that_changed_select_the_binding(tmp_path, loader):
    """safetensors and torch.from_file map the file from C: no audit event, but the mapping is in /proc/self/maps
    at the end of each check. Before, `loaded_files` named mylayer.py alone and the gate said "no layer changed"."""
    if loader == "safetensors":
        pytest.importorskip("safetensors")
    layer, weights = MAPPED[loader]
    repo = _project(tmp_path, {"mylayer.py": layer, weights: _weights(weights, 1.0)})
    assert weights in _loaded(_baseline(repo))
    _commit(repo, weights, _weights(weights, 2.0))
    _assert_static_scan_misses_it(repo, weights)   # weights/ holds no module: the directory rule does not reach it
    _assert_selected_and_failing(repo, f"{weights} changed (read by the layer in the baseline run)")


PACKAGED = 'bindings:\n  - {contract: rmsnorm, impl: "mylayers.norm:RMSNorm", framework: torch}\n'


def _packaged(tmp_path, ini: str = ""):
    """A correct layer in a package, a data file beside it that it never reads, then a branch that changes only
    that file."""
    files = {"mylayers/__init__.py": "", "mylayers/norm.py": torch_rmsnorm(),
             "mylayers/table.bin": b"\x00" * 8}
    if ini:
        files["pytest.ini"] = ini
    repo = _project(tmp_path, files, bindings=PACKAGED)
    _commit(repo, "mylayers/table.bin", b"\x01" * 8)
    return repo


def test_a_changed_file_beside_a_module_the_binding_imports_selects_it(tmp_path):
    """No baseline, the file never read: its directory is one the binding imports a module from (the directory
    rule). Before, "no layer changed ... exit 0"."""
    repo = _packaged(tmp_path)
    proc, out, doc = _gate(repo)
    because = "mylayers/table.bin changed (under mylayers/, where mylayers/norm.py is imported from)"
    assert proc.returncode == 0, out[-3000:]   # selected and run: the layer is right
    assert f"  rmsnorm mylayers.norm:RMSNorm: {because}" in proc.stdout, out[-3000:]
    sel = doc["selection"]
    assert sel["selected"] == [{"contract": "rmsnorm", "impl": "mylayers.norm:RMSNorm", "because": [because]}], sel
    assert sel["unmapped"] == {}, sel
    assert [r["outcome"] for r in doc["results"]] == ["passed"], doc["results"]


def test_changed_since_ignore_leaves_a_file_beside_a_module_out(tmp_path):
    """--changed-since-ignore GLOB (and the ini key, unless the branch changes the ini file): the same change
    selects nothing, and the selection says which glob left the file out."""
    ini = "[pytest]\nconformance_changed_since_ignore =\n    mylayers/*.bin\n"
    repo = _packaged(tmp_path, ini)
    for args in (("--changed-since-ignore", "mylayers/*.bin"), ()):   # the command line's, then the ini file's
        proc, out, doc = _gate(repo, *args)
        assert proc.returncode == 0, out[-3000:]
        assert "no layer changed since HEAD~1" in proc.stdout, out[-3000:]
        sel = doc["selection"]
        assert sel["selected"] == [] and sel["ignore"] == ["mylayers/*.bin"], sel
        assert sel["unmapped"] == {"mylayers/table.bin": "left out by --changed-since-ignore mylayers/*.bin (under "
                                                         "a directory a binding imports a module from)"}, sel
        assert doc["results"] == [], doc["results"]
    # a branch that writes the glob into the ini file itself: not applied, the binding is selected
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    (repo / "pytest.ini").write_text(ini.replace("*.bin", "*"))
    _commit(repo, "mylayers/table.bin", b"\x02" * 8)   # the ini file's change too (commit -a)
    proc, out, doc = _gate(repo)
    assert proc.returncode == 0, out[-3000:]
    sel = doc["selection"]
    assert [s["impl"] for s in sel["selected"]] == ["mylayers.norm:RMSNorm"], sel
    assert sel["ignore_not_applied"] == {"mylayers/*": "set in pytest.ini, which changed"}, sel


def test_held_files_name_what_the_process_maps_or_reads_not_what_it_only_writes(tmp_path):
    """What an executor adds at the end of a check (layerside.server._held_files): a file mapped after its descriptor
    closed, a file open for reading; not a file open for writing only (a log)."""
    import mmap
    from layer_conformance.layerside.server import _held_files
    mapped, read, log = (Path(os.path.realpath(tmp_path)) / n for n in ("w.bin", "r.txt", "log.txt"))
    mapped.write_bytes(b"\0" * 4096)
    read.write_text("x")
    with open(mapped, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with open(read) as reading, open(log, "w") as writing:
        held = _held_files()
    mapping.close()
    assert str(mapped) in held and str(read) in held and str(log) not in held, held


def test_an_ignore_glob_matches_the_path_or_a_directory_above_it():
    from layer_conformance.changed import ignored_by
    assert ignored_by("mylayers/assets/w.bin", ["*.txt", "mylayers/assets/"]) == "mylayers/assets/"
    assert ignored_by("mylayers/assets/w.bin", ["mylayers/*.bin"]) == "mylayers/*.bin"   # `*` crosses `/`
    assert ignored_by("mylayers/w.bin", ["assets", "*.txt"]) is None
