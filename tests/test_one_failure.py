"""One mistake gives one failure, in every dtype and under the baseline: eps added outside the square root
(each framework's ``EpsOutsideSqrt`` mutant) fails ``values`` in the cases' own dtype and nowhere else. The
same check in every other dtype the contract declares fails the same way, so it is blocked by it; what rests
on ``values`` is blocked too. Against a baseline where everything passed, that is one regression, with the
rows it blocks listed under it. Runs go through the public command line, as a user's do."""
import copy
import functools
import json

import pytest

from layer_conformance.frameworks import FRAMEWORKS as REGISTRY, installed
from layer_conformance.checks import PER_DTYPE
from layer_conformance.contract import bundled_contracts, load_contract
from tests.support import ROOT, pytest_run

FRAMEWORKS = [fw for fw in REGISTRY if installed(fw)]
RMSNORM = load_contract(bundled_contracts()["rmsnorm"])
OWN = RMSNORM.default_dtype


def _mutant(framework):
    return f"tests.mutants.{framework}_mutants:EpsOutsideSqrt"


def _run(cwd, framework, *args):
    checks = [a for c in PER_DTYPE for a in ("--check", c)]
    if framework == "tensorflow":   # a Keras layer builds its gain from the first input: it takes no `d`
        checks += ["--arg-map", "d="]
    # the mutants are imported from this repository, wherever the run's own directory is
    env = {"PYTHONPATH": str(ROOT)}
    return pytest_run("-q", "--assert=plain", "-n", "0", "--contract", "rmsnorm", "--impl", _mutant(framework),
                      "--framework", framework, *checks, *args, cwd=cwd, env=env)


@functools.lru_cache(maxsize=None)
def _results(framework, where):
    """The records of one run of the mutant in every dtype of the contract (once per framework)."""
    out = f"{where}/{framework}.json"
    proc = _run(where, framework, "--conformance-json", out)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(open(out).read())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("one_failure"))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_eps_outside_sqrt_fails_once_in_every_dtype(framework, workdir):
    records = _results(framework, workdir)["results"]
    failing = [r for r in records if r["outcome"] in ("failed", "error")]
    assert [(r["check"], r.get("dtype", "")) for r in failing] == [("values", "")], failing
    assert "eps is added outside the square root" in failing[0]["message"]
    judged = [r for r in records if r["outcome"] != "skipped"]   # n/a: no native layer, a dtype MXNet has not
    dtypes = {r.get("dtype", "") for r in judged}
    assert dtypes >= {""} | set(RMSNORM.extra_dtypes()) - ({"bfloat16"} if framework == "mxnet" else set()), dtypes
    for r in judged:
        if r is failing[0]:
            continue
        assert r["outcome"] == "blocked" and r["blocked_by"] == "values", r
        if r.get("dtype"):   # by the same check in the cases' own dtype, whatever the check
            assert r["message"] == f"not run: blocked by values ({OWN})", r
            assert r["details"]["blocked_in_own_dtype"] is True, r
        else:
            assert r["message"] == "not run: blocked by values (the outputs already differ from the reference)", r
        assert r["details"]["symptom"], r   # what it saw is kept


@pytest.mark.skipif("torch" not in FRAMEWORKS, reason="needs torch")
def test_the_baseline_counts_one_mistake_once(workdir, tmp_path):
    """A baseline where every check passed: the mistake is one regression, the rows it blocks under it."""
    doc = copy.deepcopy(_results("torch", workdir))
    for r in doc["results"]:
        for k in ("message", "details", "blocked_by"):
            r.pop(k, None)
        r["outcome"] = "passed" if r["outcome"] in ("failed", "blocked") else r["outcome"]
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(doc))
    blocked = [r for r in _results("torch", workdir)["results"] if r["outcome"] == "blocked"]
    proc = _run(workdir, "torch", "--baseline", str(baseline))
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-4000:]
    assert "gate: 1 regression(s) against the baseline (exit 1)" in out, out[-4000:]
    assert f"{len(blocked)} newly blocked by them" in out, out[-4000:]
    lines = out[out.index("conformance gate"):].splitlines()
    root = next(i for i, line in enumerate(lines) if "REGRESSION:" in line)
    assert "[torch-cpu] values: passed -> failed: case 'edge_rows'" in lines[root], lines[root]
    # the hint whole, at the end of the line: the line is not cut
    assert lines[root].endswith("x / (sqrt(mean(x^2)) + eps) instead of x / sqrt(mean(x^2) + eps)"), lines[root]
    under = lines[root + 1:root + 1 + len(blocked)]
    assert all(line.startswith("    newly blocked by it: rmsnorm ") and line.endswith(": passed -> blocked")
               for line in under), under
    assert sum("REGRESSION" in line for line in lines) == 1, "\n".join(lines)
    listed = {line.split(" [", 1)[1].split(": ")[0] for line in under}
    assert listed == {f"{r['framework']}-{r['device']}{'-' + r['dtype'] if r.get('dtype') else ''}] {r['check']}"
                      for r in blocked}, listed
