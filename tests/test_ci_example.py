"""docs/ci-example.yml, run: its jobs' shell steps in order, in fresh clones of a small user layer
repository with a main branch and pull-request branches, as GitHub would run them.

The harness is installed the way the workflow says, from ``$HARNESS_SPEC``, here a wheel built from
this checkout (``layer-conformance[torch] @ file://...whl``); each job gets a fresh virtual
environment that sees this environment's third-party packages (torch, pytest, ...) but not the
harness, so the install step is what makes the harness importable. The few ``uses:`` actions are
emulated (checkout: a clone; setup-python: the fresh venv; upload/download-artifact: a folder per
artifact), and the step that asks GitHub (``gh``) for main's latest results is replaced by main's
results from running the push pipeline (3 shards + merge) first. ``${{ }}`` expressions are evaluated
for the few forms the workflow uses; any other form fails the test, so the workflow stays simple.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.support import git

pytest.importorskip("torch")
pytest.importorskip("pytest_split")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci-example.yml"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


# --- expressions ------------------------------------------------------------------------------

def _value(expr: str, ctx: dict):
    expr = expr.strip()
    if expr in ("always()", "success()", "failure()"):
        return {"always()": True, "success()": not ctx["failed"], "failure()": ctx["failed"]}[expr]
    m = re.fullmatch(r"([\w.]+)\s*(==|!=)\s*'([^']*)'", expr)
    if m:
        return (str(_value(m.group(1), ctx)) == m.group(3)) == (m.group(2) == "==")
    if re.fullmatch(r"[A-Za-z_][\w-]*(\.[\w-]+)+", expr):
        obj = ctx
        for part in expr.split("."):
            assert isinstance(obj, dict) and part in obj, f"the workflow uses an unknown context value: {expr}"
            obj = obj[part]
        return obj
    raise AssertionError(f"the workflow uses an expression this test does not evaluate: {expr!r}")


def _subst(text: str, ctx: dict) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(_value(m.group(1), ctx)), str(text))


def _condition(cond, ctx) -> bool:
    if cond is None:
        return not ctx["failed"]
    expr = str(cond).strip()
    expr = expr[3:-2] if expr.startswith("${{") else expr
    status = any(f in expr for f in ("always()", "success()", "failure()"))
    return bool(_value(expr, ctx)) and (status or not ctx["failed"])


# --- the runner -----------------------------------------------------------------------------

def _filtered_site(tmp: Path) -> Path:
    """This environment's third-party packages, without the harness (which the workflow installs)."""
    site = Path(sysconfig.get_paths()["purelib"])
    out = tmp / "site"
    out.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("layer_conformance", "__editable__", "harness", "reference_impls")) \
                or name.endswith(".pth"):
            continue
        (out / entry.name).symlink_to(entry)
    return out


class Actions:
    def __init__(self, tmp: Path, origin: Path, site: Path, harness_spec: str):
        self.tmp, self.origin, self.site, self.spec = tmp, origin, site, harness_spec
        self.artifacts = tmp / "artifacts"
        self.workflow = yaml.safe_load(WORKFLOW.read_text())
        self._n = itertools.count()

    def run(self, event: str, ref: str) -> dict:
        """Every job the event triggers, in `needs` order, matrix jobs side by side: {job: [runs]}."""
        jobs, done = self.workflow["jobs"], {}
        while len(done) < len(jobs):
            ready = [n for n, j in jobs.items() if n not in done and all(
                d in done for d in ([j["needs"]] if isinstance(j.get("needs"), str) else j.get("needs", [])))]
            for name in ready:
                job = jobs[name]
                needs = [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", [])
                gate = {"failed": any(not r["ok"] for d in needs for r in done[d]), **self._ctx(event, {})}
                if any(done[d] == [] for d in needs) or not _condition(job.get("if"), gate):
                    done[name] = []   # skipped
                    continue
                matrix = job.get("strategy", {}).get("matrix", {})
                combos = [dict(zip(matrix, values)) for values in itertools.product(*matrix.values())] or [{}]
                with ThreadPoolExecutor(len(combos)) as pool:
                    done[name] = list(pool.map(lambda m: self._job(job, event, ref, m), combos))
        return done

    def _ctx(self, event, matrix):
        return {"failed": False, "matrix": matrix, "vars": {"CONFORMANCE_HARNESS_SPEC": self.spec},
                "github": {"event_name": event, "base_ref": "main" if event == "pull_request" else "",
                           "token": "(not used: gh is replaced)"}}

    def _job(self, job, event, ref, matrix) -> dict:
        n = next(self._n)
        ws, venv = self.tmp / f"ws{n}", self.tmp / f"venv{n}"
        ctx = self._ctx(event, matrix)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("PYTEST_")}
        env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", GITHUB_WORKSPACE=str(ws),
                   PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        for k, v in {**self.workflow.get("env", {}), **job.get("env", {})}.items():
            env[k] = _subst(v, ctx)
        steps = []
        for step in job["steps"]:
            if not _condition(step.get("if"), ctx):
                continue
            t0 = time.monotonic()
            rc, out = self._step(step, ws, venv, {**env, **{k: _subst(v, ctx) for k, v in step.get("env", {}).items()}},
                                 ctx, ref)
            steps.append({"name": step.get("name") or step.get("uses") or step["run"][:40], "rc": rc,
                          "seconds": time.monotonic() - t0, "output": out, "run": step.get("run", "")})
            ctx["failed"] = ctx["failed"] or rc != 0
        return {"ok": not ctx["failed"], "steps": steps, "matrix": matrix, "workspace": ws}

    def _step(self, step, ws, venv, env, ctx, ref):
        uses = step.get("uses", "")
        with_ = {k: _subst(v, ctx) for k, v in step.get("with", {}).items()}
        if uses.startswith("actions/checkout@"):
            subprocess.run(["git", "clone", "-q", str(self.origin), str(ws)], check=True)
            subprocess.run(["git", "checkout", "-q", ref], cwd=ws, check=True)
            return 0, ""
        if uses.startswith("actions/setup-python@"):
            # a fresh interpreter environment: the packages of this one, the harness not installed
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print("
                                        "sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                                       check=True).stdout.strip())
            (site / "third_party.pth").write_text(f"{self.site}\n")
            return 0, ""
        if uses.startswith("actions/upload-artifact@"):
            src = ws / with_["path"].strip()
            if not src.exists():
                return 1, f"upload-artifact: {src} does not exist"
            shutil.copytree(src, self.artifacts / with_["name"], dirs_exist_ok=True)
            return 0, ""
        if uses.startswith("actions/download-artifact@"):
            pattern = with_["pattern"].replace("*", ".*")
            assert str(with_.get("merge-multiple")).lower() == "true"
            if not self.artifacts.is_dir():
                return 1, "download-artifact: no job uploaded an artifact"
            for art in sorted(self.artifacts.iterdir()):
                if re.fullmatch(pattern, art.name):
                    shutil.copytree(art, ws / with_["path"].strip(), dirs_exist_ok=True)
            return 0, ""
        assert not uses, f"an action this test does not emulate: {uses}"
        script = _subst(step["run"], ctx)
        if step.get("id") == "baseline":
            # asks GitHub for main's latest successful push run; here: main's results from the push pipeline
            assert "gh run download" in script and "--name conformance-results" in script
            (ws / "baseline").mkdir(exist_ok=True)
            shutil.copy(self.artifacts / "conformance-results" / "results.json", ws / "baseline" / "results.json")
            return 0, ""
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=ws, env=env,
                              capture_output=True, text=True, timeout=600)
        return proc.returncode, proc.stdout + proc.stderr


# --- a user's layer repository ----------------------------------------------------------------

ACTIVATIONS = '''import torch


class Log1pExp(torch.autograd.Function):
    """log(1 + exp(x)) with a hand-written, stable gradient."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(x, torch.zeros_like(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''

PLAIN = '''import torch


def log1pexp(x):
    return torch.logaddexp(x, torch.zeros_like(x))
'''


def _user_repo(path: Path) -> Path:
    """main: two torch implementations of log1pexp under their own contract; two pull-request branches."""
    (path / "layers").mkdir(parents=True)
    (path / "layers" / "__init__.py").write_text("")
    (path / "layers" / "activations.py").write_text(ACTIVATIONS)
    (path / "layers" / "plain.py").write_text(PLAIN)
    (path / "refs").mkdir()
    (path / "refs" / "__init__.py").write_text("")
    # the user's own contract and numpy reference: copies of the bundled log1pexp ones
    from layer_conformance.contract import find_contract
    contract = find_contract("log1pexp").read_text()
    module = yaml.safe_load(contract)["reference"]["module"]
    shutil.copy(importlib.util.find_spec(module).origin, path / "refs" / "log1pexp.py")
    (path / "conformance").mkdir()
    # the user's contract runs in float32 alone (torch.logaddexp's double backward is NaN in float16 where
    # the exact Hessian is finite: a real finding of the bundled contract, not this workflow's point)
    contract = re.sub(r"(?m)^dtypes:.*\n", "", contract)
    (path / "conformance" / "log1pexp.yaml").write_text(contract.replace(module, "refs.log1pexp"))
    (path / "conformance" / "bindings.yaml").write_text(
        "- {contract: conformance/log1pexp.yaml, impl: 'layers.activations:Log1pExp'}\n"
        "- {contract: conformance/log1pexp.yaml, impl: 'layers.plain:log1pexp', framework: torch}\n")
    (path / "conformance" / "expectations.yaml").write_text("expectations: []\n")
    (path / "README.md").write_text("# my layers\n")
    (path / ".gitignore").write_text("reports/\nbaseline/\n__pycache__/\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "layers")
    for branch, file, old, new in [
        ("halve-gradient", "layers/activations.py", "return grad_output * torch.sigmoid(x)",
         "return 0.5 * grad_output * torch.sigmoid(x)"),
        ("docs-only", "README.md", "# my layers\n", "# my layers\n\nNow with a README.\n"),
    ]:
        git(path, "checkout", "-q", "-b", branch, "main")
        text = (path / file).read_text()
        assert old in text
        (path / file).write_text(text.replace(old, new))
        git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", branch)
    git(path, "checkout", "-q", "main")
    return path


def _wheel(tmp: Path) -> Path:
    """This checkout (tracked and untracked, not ignored files) built into a wheel, outside the tree."""
    src, dist = tmp / "harness-src", tmp / "dist"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(dist), str(src)], capture_output=True, text=True,
                          env={**os.environ, "PIP_NO_INDEX": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(dist.glob("layer_conformance-*.whl"))


@pytest.fixture(scope="module")
def ci(tmp_path_factory):
    """The workflow's push pipeline on main has run: 3 shards and the merge, whose results are the baseline."""
    tmp = tmp_path_factory.mktemp("ci")
    wheel = _wheel(tmp)
    actions = Actions(tmp, _user_repo(tmp / "origin"), _filtered_site(tmp),
                      f"layer-conformance[torch] @ {wheel.as_uri()}")
    jobs = actions.run("push", "main")
    return actions, jobs


def _show(runs) -> str:
    return "\n".join(f"--- {s['name']} (rc {s['rc']}, {s['seconds']:.1f} s)\n{s['output'][-2500:]}"
                     for r in runs for s in r["steps"])


def _step(run, fragment):
    return next(s for s in run["steps"] if fragment in s["run"])


def test_workflow_is_consistent():
    wf = yaml.safe_load(WORKFLOW.read_text())
    text = WORKFLOW.read_text()
    assert "pip install layer-conformance" not in text, "the package is not on an index"
    assert len(wf["jobs"]["shards"]["strategy"]["matrix"]["group"]) == int(wf["env"]["SHARDS"])
    for name, job in wf["jobs"].items():
        runs = [i for i, s in enumerate(job["steps"]) if "run" in s]
        checkout = next(i for i, s in enumerate(job["steps"]) if str(s.get("uses", "")).startswith("actions/checkout"))
        assert checkout < min(runs), f"job {name}: a shell step runs before the checkout"


def test_push_to_main_runs_three_shards_and_one_merge(ci):
    actions, jobs = ci
    assert jobs["changed"] == [], "the pull-request job does not run on a push"
    assert len(jobs["shards"]) == 3 and len(jobs["merge"]) == 1
    assert all(r["ok"] for r in jobs["shards"] + jobs["merge"]), _show(jobs["shards"] + jobs["merge"])
    shards = [json.loads((actions.artifacts / f"conformance-shard-{k}" / f"results-{k}.json").read_text())["results"]
              for k in (1, 2, 3)]
    # a check the contract never asks for is no item: every shard's file holds its n/a record (no duration)
    ran = [[r for r in s if r.get("duration") is not None] for s in shards]
    assert all(ran) and sum(map(len, ran)) == len({r["nodeid"] for s in ran for r in s})
    merged = json.loads((actions.artifacts / "conformance-results" / "results.json").read_text())["results"]
    assert sorted(r["nodeid"] for r in merged) == sorted({r["nodeid"] for s in shards for r in s})
    assert {r["impl"] for r in merged} == {"layers.activations:Log1pExp", "layers.plain:log1pexp"}
    assert all(r["nodeid"].startswith("conformance/log1pexp.yaml::log1pexp[") for r in merged), "ids in repo terms"
    assert not [r for r in merged if r["outcome"] in ("failed", "error")]
    assert any(r["check"] == "gradients" and r["outcome"] == "passed" for r in merged)
    assert "gate: passed" in _step(jobs["merge"][0], "layer_conformance merge")["output"]
    assert (actions.artifacts / "conformance-results" / "conformance.html").is_file()


def test_pull_request_that_halves_a_custom_gradient_fails_the_gate(ci):
    actions, _ = ci
    jobs = actions.run("pull_request", "halve-gradient")
    assert jobs["shards"] == [] and jobs["merge"] == []
    (run,) = jobs["changed"]
    gate = _step(run, "--changed-since")
    assert gate["rc"] == 1, _show([run])
    assert "REGRESSION" in gate["output"] and "layers.activations:Log1pExp" in gate["output"]
    results = json.loads((actions.artifacts / "conformance-pull-request" / "results.json").read_text())["results"]
    assert {r["impl"] for r in results} == {"layers.activations:Log1pExp"}, "only the changed layer ran"
    assert any(r["check"] == "gradients" and r["outcome"] == "failed" for r in results)


def test_pull_request_that_touches_no_layer_passes_quickly(ci):
    actions, jobs_main = ci
    jobs = actions.run("pull_request", "docs-only")
    (run,) = jobs["changed"]
    assert run["ok"], _show([run])
    gate = _step(run, "--changed-since")
    shard_seconds = min(_step(r, "--splits")["seconds"] for r in jobs_main["shards"])
    # quickly: no check ran, so well under a shard's time (which imports torch and runs checks)
    assert gate["seconds"] < 60 and gate["seconds"] < shard_seconds, (gate["seconds"], shard_seconds)
    results = actions.artifacts / "conformance-pull-request" / "results.json"
    if results.exists():
        assert json.loads(results.read_text())["results"] == []
