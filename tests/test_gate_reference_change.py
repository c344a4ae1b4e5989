"""A contract's ``reference: {impl}`` is trusted code: a gate run (--changed-since) on a change that alters the
reference implementation (its module, or a module it imports inside the repository) stops before any check with a
contract error (exit 3) naming the reference and the files, since a change to both a layer and its reference could
green a wrong layer; --accept-reference-change (command line only), given once a reviewer approved it, runs the
bindings and says so. A real git repository with a main branch and pull-request branches, as tests/test_gate_holes.py."""
import json
import textwrap

import pytest

from tests.support import gate_run, git_branch, git_repo

ACTS = "import torch\n\n\ndef act(a):\n    return torch.nn.functional.silu(a)\n"

# the layer under test and the trusted original share acts.py: a change there alters both
LAYER = textwrap.dedent("""\
    import torch
    from torch import nn

    from acts import act


    class MLP(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.up = nn.Parameter(torch.randn(h, d) / d ** 0.5)
            self.down = nn.Parameter(torch.randn(d, h) / h ** 0.5)

        def forward(self, x):
            return act(x @ self.up.T) @ self.down.T
    """)
ORIGINAL = LAYER.replace("class MLP", "class Original")

CONTRACT = textwrap.dedent("""\
    name: mlp
    kind: layer
    constructor: {d: 4, h: 8}
    cases:
      - name: random
        inputs:
          x: {shape: [3, d], dtype: float32}
    state:
      trainable:
        up: {shape: [h, d], dtype: float32, init: random}
        down: {shape: [d, h], dtype: float32, init: random}
    reference:
      impl: "original:Original"
      framework: torch
    """)

BINDINGS = "bindings:\n  - {contract: conformance/mlp.yaml, impl: \"mylayers:MLP\", framework: torch}\n"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    pytest.importorskip("torch")
    repo = tmp_path_factory.mktemp("repo")
    (repo / "conformance").mkdir()
    (repo / "acts.py").write_text(ACTS)
    (repo / "mylayers.py").write_text(LAYER)
    (repo / "original.py").write_text(ORIGINAL)
    (repo / "conformance" / "mlp.yaml").write_text(CONTRACT)
    (repo / "conformance" / "bindings.yaml").write_text(BINDINGS)
    (repo / ".gitignore").write_text("out/\n__pycache__/\n")
    return git_repo(repo)


def _relu(r):
    (r / "acts.py").write_text(ACTS.replace("silu", "relu"))


def test_a_change_to_the_reference_implementation_stops_the_gate_until_accepted(repo):
    git_branch(repo, "shared-helper", _relu)   # the layer and its reference both become relu: a wrong layer
    proc = gate_run(repo, "--changed-since", "main", "--conformance-json", "out/r.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "contract not trusted in this change (1 reference implementation changed)" in out, out
    assert ("mlp.yaml:12: reference.impl: the reference implementation original:Original (torch) changed in this "
            "change since main (acts.py): a change to both a layer and the reference it is judged against can "
            "make a wrong layer pass; a reviewer must approve") in out, out
    assert "--accept-reference-change (command line only)" in out, out
    assert " passed" not in out, out   # stopped before any check

    proc = gate_run(repo, "--changed-since", "main", "--accept-reference-change", "--conformance-json", "out/r.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert ("the reference implementation original:Original of conformance/mlp.yaml changed in this change "
            "(acts.py): accepted by --accept-reference-change") in out, out
    selection = json.loads((repo / "out" / "r.json").read_text())["selection"]
    assert selection["reference_changed"] == [{"contract": "conformance/mlp.yaml", "reference": "original:Original",
                                               "files": ["acts.py"], "accepted": True}]
    assert ("acts.py changed (imported by original, in the contract's reference implementation)"
            in selection["selected"][0]["because"]), selection


def test_a_change_to_the_reference_module_itself_is_named(repo):
    git_branch(repo, "original-only", lambda r: (r / "original.py").write_text(ORIGINAL + "\n# reviewed?\n"))
    proc = gate_run(repo, "--changed-since", "main", "--conformance-json", "out/r.json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "changed in this change since main (original.py)" in proc.stdout + proc.stderr


def test_a_change_to_the_layer_alone_runs_as_before(repo):
    git_branch(repo, "layer-only", lambda r: (r / "mylayers.py").write_text(LAYER.replace("act(x @", "act(2 * x @")))
    proc = gate_run(repo, "--changed-since", "main", "--conformance-json", "out/r.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out   # the wrong layer fails against the unchanged reference
    assert "mlp[MLP-torch-cpu]::values failed" in out, out
    assert "reference implementation" not in out, out
    assert "reference_changed" not in json.loads((repo / "out" / "r.json").read_text())["selection"]


def test_the_selection_names_a_reference_changed_through_its_imports(tmp_path, monkeypatch):
    """select_changed alone (no run): the shared helper selects the binding, the reference's closure is named,
    and the acceptance is recorded; a contract with a numpy reference module is not stopped."""
    from layer_conformance.changed import ReferenceChanged, select_changed
    (tmp_path / "conformance").mkdir()
    for name, text in (("acts.py", ACTS), ("mylayers.py", LAYER), ("original.py", ORIGINAL),
                       ("conformance/mlp.yaml", CONTRACT), ("conformance/bindings.yaml", BINDINGS),
                       ("conformance/numpy_ref.yaml", CONTRACT.replace(
                           'impl: "original:Original"\n  framework: torch', "module: original"))):
        (tmp_path / name).write_text(text)
    git_branch(git_repo(tmp_path), "shared-helper", _relu)
    monkeypatch.chdir(tmp_path)
    entries = [{"contract": "conformance/mlp.yaml", "impl": "mylayers:MLP", "framework": "torch"}]
    with pytest.raises(ReferenceChanged) as info:
        select_changed(entries, "conformance/bindings.yaml", "main")
    assert info.value.changed[0]["files"] == ["acts.py"] and info.value.changed[0]["line"] == 12
    _, selection, _ = select_changed(entries, "conformance/bindings.yaml", "main", accept_reference_change=True)
    assert selection["reference_changed"][0]["accepted"] is True
    numpy_ref = [{"contract": "conformance/numpy_ref.yaml", "impl": "mylayers:MLP", "framework": "torch"}]
    selected, selection, _ = select_changed(numpy_ref, "conformance/bindings.yaml", "main")
    assert selected and "reference_changed" not in selection
