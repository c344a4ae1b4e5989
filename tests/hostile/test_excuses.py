"""Issue 29 §12: self-written excuses. An expectations entry ``check: "*"`` excused any failure of its binding,
and a pull request could add it beside the layer it breaks. Entries now name exact ids (a glob, or an entry
without ``check``, needs ``--allow-glob-expectations``), and under ``--changed-since`` the gate lists every
entry the branch added since the base, before its verdict. Run through the public command line, from a
user's directory or a temporary git repository."""
import json
import textwrap

import pytest

from tests.support import ROOT, git_branch, git_repo, pytest_run

pytest.importorskip("torch")

GOOD = "from torch import nn\n\nclass Centered(nn.Module):\n    def forward(self, X):\n        return X - X.mean()\n"
BROKEN = GOOD.replace("X - X.mean()", "X - X.mean() + 0.5")
FLAG = "--allow-glob-expectations"


def _pytest(cwd, *args):
    proc = pytest_run("-q", "--assert=plain", "--check", "parameters", "--check", "values", "--dtype", "float32",
                      *args, cwd=cwd, env={"PYTHONPATH": str(ROOT)}, timeout=300)
    return proc, proc.stdout + proc.stderr


def _user(tmp_path, expectations: str):
    (tmp_path / "mylayers.py").write_text(BROKEN)
    (tmp_path / "exp.yaml").write_text(textwrap.dedent(expectations))
    return tmp_path


IMPL = ("--contract", "centered", "--impl", "mylayers:Centered", "--expectations", "exp.yaml")
STAR = """\
    expectations:
      - contract: centered
        impl: "mylayers:Centered"
        check: "*"
        expected: fail
        reason: flaky, will look later
    """


def test_a_glob_entry_is_a_usage_error_naming_the_file_the_entry_and_the_flag(tmp_path):
    proc, out = _pytest(_user(tmp_path, STAR), *IMPL)
    assert proc.returncode == 4, out[-3000:]
    assert "exp.yaml:2: check: '*' is a glob" in proc.stderr, out[-3000:]
    assert proc.stderr.count(FLAG) == 1 and proc.stderr.count("exp.yaml:2") == 1, proc.stderr
    assert "passed" not in proc.stdout and "xfail" not in proc.stdout, out[-3000:]   # nothing ran


@pytest.mark.parametrize("entry,why", [
    ('impl: "mylayers:*"\n        check: values', "impl: 'mylayers:*' is a glob"),
    ("impl: mylayers:Centered", "names no check, so it matches every check"),
])
def test_an_impl_glob_or_an_entry_without_check_is_refused_too(tmp_path, entry, why):
    proc, out = _pytest(_user(tmp_path, f"""\
    expectations:
      - {entry}
        expected: fail
        reason: whatever fails
    """), *IMPL)
    assert proc.returncode == 4, out[-3000:]
    assert f"exp.yaml:2: {why}" in proc.stderr and FLAG in proc.stderr, proc.stderr


def test_with_the_flag_a_glob_entry_is_accepted(tmp_path):
    proc, out = _pytest(_user(tmp_path, STAR), *IMPL, FLAG)
    assert proc.returncode == 0, out[-3000:]
    assert "1 xfailed" in proc.stdout, out[-3000:]


def test_an_exact_entry_excuses_its_check_and_only_it(tmp_path):
    proc, out = _pytest(_user(tmp_path, STAR.replace('check: "*"', "check: values")), *IMPL)
    assert proc.returncode == 0, out[-3000:]
    assert "1 passed, 1 xfailed" in proc.stdout, out[-3000:]
    # an exact id is not a pattern: a check named like a prefix of it excuses nothing
    proc, out = _pytest(_user(tmp_path, STAR.replace('check: "*"', "check: valu")), *IMPL)
    assert proc.returncode == 1, out[-3000:]
    assert "exp.yaml:2: the entry for contract=centered, impl=mylayers:Centered, check=valu matches no check" \
        in proc.stdout, out[-3000:]


def test_update_expectations_writes_exact_entries_that_load_without_the_flag(tmp_path):
    (tmp_path / "mylayers.py").write_text(BROKEN)
    proc, out = _pytest(tmp_path, *IMPL, "--update-expectations")
    assert proc.returncode == 0, out[-3000:]
    from layer_conformance.gate import load_expectations
    [entry] = load_expectations(tmp_path / "exp.yaml")   # no glob allowed here
    assert entry.patterns == {"contract": "centered", "impl": "mylayers:Centered", "framework": "torch",
                              "device": "cpu", "check": "values"}, entry.patterns


# --- --changed-since: the excuses a branch adds are listed -----------------------------------------

BINDINGS = 'bindings:\n  - {contract: centered, impl: "mylayers:Centered", framework: torch}\n'
OLD_ENTRY = "  - {contract: centered, impl: \"mylayers:Centered\", check: parameters, expected: fail, reason: old}\n"
NEW_ENTRY = ("  - {contract: centered, impl: \"mylayers:Centered\", check: values, expected: fail,"
             " reason: the offset is on purpose}\n")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """main: a green layer, its binding, and an expectations file with one old entry."""
    repo = tmp_path_factory.mktemp("excuses")
    (repo / "conformance").mkdir()
    (repo / "mylayers.py").write_text(GOOD)
    (repo / "conformance" / "bindings.yaml").write_text(BINDINGS)
    (repo / "conformance" / "expectations.yaml").write_text("expectations:\n" + OLD_ENTRY)
    (repo / ".gitignore").write_text("out/\n__pycache__/\n")
    git_repo(repo)
    return repo


def _gate(repo, expectations="conformance/expectations.yaml"):
    return _pytest(repo, "--bindings", "conformance/bindings.yaml", "--changed-since", "main",
                   "--expectations", expectations, "--conformance-json", "out/r.json")


def test_a_branch_that_breaks_its_layer_and_excuses_it_gets_the_excuse_listed(repo):
    def change(r):
        (r / "mylayers.py").write_text(BROKEN)
        with open(r / "conformance" / "expectations.yaml", "a") as f:
            f.write(NEW_ENTRY)
    git_branch(repo, "excuse", change)
    proc, out = _gate(repo)
    assert proc.returncode == 0, out[-3000:]   # the excuse holds: the review is where it is judged
    header = "expectations added since main: 1 entry in conformance/expectations.yaml"
    listed = ("  + conformance/expectations.yaml:3: contract=centered, impl=mylayers:Centered, check=values, "
              "expected failed/error (the offset is on purpose)")
    assert header in proc.stdout and listed in proc.stdout, out[-3000:]
    assert proc.stdout.count(header) == 1, out[-3000:]   # said once
    assert "+ conformance/expectations.yaml:2" not in proc.stdout, out[-3000:]   # main's own entry is not new
    assert proc.stdout.index(listed) < proc.stdout.index("1 xfailed"), out[-3000:]   # before the verdict
    added = json.loads((repo / "out" / "r.json").read_text())["selection"]["expectations_added"]
    assert [(e["check"], e["where"]) for e in added] == [("values", "conformance/expectations.yaml:3")], added


def test_an_expectations_file_the_base_did_not_have_is_listed_whole(repo):
    def change(r):
        (r / "mylayers.py").write_text(BROKEN)
        (r / "conformance" / "more.yaml").write_text("expectations:\n" + NEW_ENTRY)
    git_branch(repo, "new-file", change)
    proc, out = _gate(repo, "conformance/more.yaml")
    assert proc.returncode == 0, out[-3000:]
    assert "expectations added since main: 1 entry in conformance/more.yaml" in proc.stdout, out[-3000:]
    assert "  + conformance/more.yaml:2: contract=centered" in proc.stdout, out[-3000:]


def test_a_branch_that_adds_no_entry_says_so(repo):
    git_branch(repo, "plain", lambda r: (r / "mylayers.py").write_text(GOOD + "\n# a comment\n"))
    proc, out = _gate(repo)
    assert "expectations added since main: none (conformance/expectations.yaml)" in proc.stdout, out[-3000:]
