"""How fast the harness is, against what the same work costs without it. A script, not a test:

    python benchmarks/bench.py                 # everything, on every installed framework
    python benchmarks/bench.py --skip-matrix   # only collection and gradient scaling (quick)
    python benchmarks/bench.py --json out.json
    python benchmarks/bench.py --against REV   # only the matrix, side by side with commit REV (medians)
    python benchmarks/bench.py --opt-in        # what each opt-in check adds to the matrix, and compiled + export (-n 0 and -n 2)
    python benchmarks/bench.py --opt-in --rounds 3   # the same, the runs without and with both repeated (medians)
    python benchmarks/bench.py --opt-in --both-only --rounds 2   # only the runs without and with compiled + export
    python benchmarks/bench.py --dtypes        # only the matrix without and with the contracts' dtypes
    python benchmarks/bench.py --sandbox --frameworks torch   # the executors' sandbox: its cost per target
    python benchmarks/bench.py --inner-loop --rounds 3        # one layer per framework against its own figure,
                                                              # and the cold cost of one more binding (1 against 8)
    python benchmarks/bench.py --new-axes --rounds 2          # what the checks of the new axes (issue 32) add
    python benchmarks/bench.py --new-contracts --rounds 2     # what the newest bundled contracts add

It prints:
  matrix      wall time of the bundled matrix under ``pytest -n 0`` and ``-n 2`` (subprocesses);
  floor       the same frameworks imported once, in one fresh process, plus the computations without
              the harness: each bundled reference layer built, a forward on each case, one backward
              (through the adapters' build/call/vjp, the thinnest framework-neutral way to call a layer;
              no pytest, no checks, no contract validation, no results);
  overhead    matrix (-n 0) wall / floor wall;
  collection  ``pytest --collect-only -q`` over a synthetic matrix of 10,000 checks (generated contracts
              and a --bindings file in a temporary directory), wall time of the whole command and the
              time pytest itself reports, against the same command with one target (startup);
  gradients   layer_conformance.runner.run_check(ctx, "gradients") as the input grows from 8 to 8,192 elements;
  boundary    the per-check cost of the process boundary: every check of one bundled contract through
              executors, warm, best of 3; the round trips per check, and one empty round trip's cost.

Timings are wall-clock on a shared machine: run it on an idle one, and read differences below ~10 %
as noise.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = {"overhead": 1.2, "speedup": 1.7, "collection_s": 2.0}


def _installed_frameworks() -> list[str]:
    from layer_conformance.frameworks import FRAMEWORKS, installed
    return [fw for fw in FRAMEWORKS if installed(fw)]


def _run(cmd: list[str], cwd=ROOT, timeout=3600, env=None, times=None) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    started = time.perf_counter()  # CLOCK_MONOTONIC: comparable with the child's perf_counter on Linux
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    ended = time.perf_counter()
    if times is not None:
        times.update(started=started, ended=ended)
    return ended - started, proc


def _last_line(text: str) -> str:
    lines = [ln.strip("= ") for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# --- matrix and floor ---------------------------------------------------------------------

# A plugin loaded into the measured pytest (-p): it times pytest's own phases from the inside.
_TIMER_PLUGIN = """
import json, os, time
import pytest
_t = {}
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _t["configure"] = time.perf_counter()
@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _t["configured"] = time.perf_counter()
@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    _t["collect"] = time.perf_counter()
def pytest_collection_finish(session):
    _t["collected"] = time.perf_counter()
    _t["items"] = len(session.items)
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    _t["finished"] = time.perf_counter()
def pytest_unconfigure(config):
    _t["unconfigure"] = time.perf_counter()
    if hasattr(config, "workerinput"):  # an xdist worker: the controller's times are the ones wanted
        return
    with open(os.environ["BENCH_TIMER_OUT"], "w") as f:
        json.dump(_t, f)
"""


def matrix(frameworks: list[str], workers: str, out_dir: Path, root: Path = ROOT, checks=None,
           extra: tuple = ()) -> dict:
    """One run of the bundled matrix (of the checkout at ``root``; ``checks``: the --check list, default
    the default checks; ``extra``: more pytest arguments). With -n 0 it is also taken apart: the time the checks' own calls took (pytest
    --durations, by framework) and what the rest of the process took."""
    (out_dir / "bench_timer.py").write_text(_TIMER_PLUGIN)
    timer = out_dir / f"timer-n{workers}.json"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "bench_timer", "-q", "-n", workers,
           "--durations=0", "--durations-min=0", "--conformance-json", str(out_dir / f"results-n{workers}.json")]
    for fw in frameworks:
        cmd += ["--framework", fw]
    for check in checks or ():
        cmd += ["--check", check]
    cmd += list(extra)
    outer: dict = {}
    wall, proc = _run(cmd, cwd=root, env={"PYTHONPATH": f"{root}{os.pathsep}{out_dir}", "BENCH_TIMER_OUT": str(timer)},
                      times=outer)
    summary = next((ln for ln in reversed(proc.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", ln)), "")
    calls: dict[str, float] = {}
    for m in re.finditer(r"^([\d.]+)s call\s+\S+\[(?:[^\]]*-)?(\w+)-\w+\]::\w+", proc.stdout, re.M):
        calls[m.group(2)] = calls.get(m.group(2), 0.0) + float(m.group(1))
    t = json.loads(timer.read_text()) if timer.exists() else {}
    phases = {}
    if {"configure", "configured", "finished", "unconfigure"} <= set(t):
        phases = {"startup_s": t["configure"] - outer["started"], "configure_s": t["configured"] - t["configure"],
                  "session_s": t["finished"] - t["configured"], "summary_s": t["unconfigure"] - t["finished"],
                  "exit_s": outer["ended"] - t["unconfigure"]}
    return {"wall_s": wall, "exit": proc.returncode, "summary": summary.strip("= "), "calls_s": calls, **phases}


def floor_in_this_process(frameworks: list[str]) -> dict:
    """Import each framework once and run each bundled reference layer: build, forward per case, one backward."""
    import importlib

    import numpy as np
    import yaml

    from layer_conformance import inputs
    from layer_conformance import layerside  # the floor: the adapters called in this process
    from layer_conformance.checks.base import construct
    from layer_conformance.contract import Contract, bundled_contracts
    from layer_conformance.targets import bundled_impl, resolve_impl

    report = {"import_s": {}, "compute_s": {}, "layers": {}, "failed": []}
    specs = {name: yaml.safe_load(path.read_text()) for name, path in bundled_contracts().items()}
    for fw in frameworks:
        started = time.perf_counter()
        adapter = layerside.get_adapter(fw)
        importlib.import_module(adapter.module)
        report["import_s"][fw] = time.perf_counter() - started
        started = time.perf_counter()
        done = 0
        for name, data in specs.items():
            spec = bundled_impl(fw, name)
            if spec is None:
                continue
            try:
                impl = resolve_impl(spec)
                contract = Contract(data=data, path=name)  # unvalidated: only its shapes are read
                cases = [list(inputs.case_inputs(contract, case, 0).values()) for case in contract.cases]
                if contract.kind == "function":
                    layer, fn = None, adapter.as_callable(impl)
                else:
                    layer = adapter.build(construct(impl, contract.constructor), cases[0])
                    fn = layer
                for case in cases:
                    out = adapter.call(fn, case)
                first = cases[0]
                out = adapter.numpy(adapter.call(fn, first))
                if (contract.data.get("gradients") or {}).get("mode") != "none":
                    wrt = [i for i, a in enumerate(first) if np.issubdtype(a.dtype, np.floating)]
                    adapter.vjp(fn, layer, first, wrt, np.ones(out.shape, dtype=out.dtype))
                done += 1
            except Exception as exc:  # a layer the floor cannot drive generically is listed, not fatal
                report["failed"].append(f"{fw}/{name}: {type(exc).__name__}: {str(exc)[:120]}")
        report["compute_s"][fw] = time.perf_counter() - started
        report["layers"][fw] = done
    return report


def floor(frameworks: list[str]) -> dict:
    wall, proc = _run([sys.executable, str(Path(__file__).resolve()), "--floor-only", ",".join(frameworks)])
    if proc.returncode != 0:
        raise SystemExit(f"the floor run failed:\n{proc.stdout}\n{proc.stderr}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["wall_s"] = wall
    return report


# --- collection -----------------------------------------------------------------------------

def _synthetic(tmp: Path, n_checks: int, impls_per_contract: int, framework: str) -> tuple[Path, int]:
    """Contracts (copies of rmsnorm under new names) and a --bindings file worth ``n_checks`` items."""
    from layer_conformance.checks import CHECKS
    from layer_conformance.contract import bundled_contracts
    targets = math.ceil(n_checks / len(CHECKS))
    n_contracts = math.ceil(targets / impls_per_contract)
    base = bundled_contracts()["rmsnorm"].read_text()
    impl_module = tmp / "bench_impls.py"
    impl_module.write_text(f"from layer_conformance.reference_impls.{framework}.rmsnorm import IMPL\n"
                           + "".join(f"IMPL_{i} = IMPL\n" for i in range(impls_per_contract)))
    entries = []
    for c in range(n_contracts):
        path = tmp / f"rms_{c:05d}.yaml"
        path.write_text(base.replace("name: rmsnorm", f"name: rms_{c:05d}", 1))
        for i in range(impls_per_contract):
            if len(entries) < targets:
                entries.append(f"- {{contract: {path}, impl: 'bench_impls:IMPL_{i}', framework: {framework}}}\n")
    bindings = tmp / f"bindings-{n_checks}-{impls_per_contract}.yaml"
    bindings.write_text("".join(entries))
    return bindings, len(entries) * len(CHECKS)


def collection(n_checks: int, framework: str) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "bench_timer.py").write_text(_TIMER_PLUGIN)
        for label, n, per in [("startup (1 target)", 1, 1),
                              (f"{n_checks} checks, one contract per target", n_checks, 1),
                              (f"{n_checks} checks, 10 implementations per contract", n_checks, 10)]:
            sub = tmp / f"{n}-{per}"
            sub.mkdir()
            bindings, items = _synthetic(sub, n, per, framework)
            out = sub / "timer.json"
            cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "bench_timer", "--collect-only",
                   "-q", "--bindings", str(bindings), "-n", "0"]
            wall, proc = _run(cmd, cwd=sub, env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp}", "BENCH_TIMER_OUT": str(out)})
            t = json.loads(out.read_text()) if out.exists() else {}
            ok = {"configure", "configured", "collect", "collected"} <= set(t)
            rows.append({"label": label, "items": items, "collected": t.get("items"), "wall_s": wall,
                         "configure_s": t["configured"] - t["configure"] if ok else None,
                         "collect_s": t["collected"] - t["collect"] if ok else None,
                         "exit": proc.returncode, "tail": "" if ok else _last_line(proc.stdout + proc.stderr)})
    return rows


# --- gradient check scaling -----------------------------------------------------------------

def gradient_scaling(framework: str, sizes=(8, 64, 512, 4096, 8192), repeats=3) -> list[dict]:
    from layer_conformance.contract import bundled_contracts, load_contract
    from layer_conformance.boundary import Session
    from layer_conformance.runner import context_for, run_check
    from layer_conformance.targets import bundled_impl
    base = bundled_contracts()["rmsnorm"].read_text()
    impl = bundled_impl(framework, "rmsnorm")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.closing(Session()) as session:
        for n in sizes:
            rows_n = max(1, n // 8)  # rmsnorm's d is 8: [n/8, d] holds n elements
            text = re.sub(r"cases:.*?\nstate:", "cases:\n  - name: sized\n    inputs:\n"
                          f"      X: {{shape: [{rows_n}, d], dtype: float32, draw: normal}}\nstate:", base, flags=re.S)
            path = Path(tmp) / f"rms_{n}.yaml"
            path.write_text(text)
            ctx = context_for(load_contract(path), impl, framework, session=session)
            run_check(ctx, "gradients")  # warm-up: first-call costs (tracing, allocation) are not scaling
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                rec = run_check(ctx, "gradients")
                times.append(time.perf_counter() - started)
            rows.append({"elements": rows_n * 8, "best_s": min(times), "outcome": rec["outcome"]})
    return rows


def boundary(framework: str, contract: str = "rmsnorm", repeats=3) -> dict:
    """Every check of one bundled contract through executors, warm: the time per check, the round trips per
    check, and what one round trip costs on its own (an empty request to the layer's executor)."""
    from layer_conformance.checks import CHECKS
    from layer_conformance.contract import bundled_contracts, load_contract
    from layer_conformance.boundary import Session
    from layer_conformance.boundary.client import Executor
    from layer_conformance.runner import context_for, run_check
    from layer_conformance.targets import bundled_impl
    c = load_contract(bundled_contracts()[contract])
    spec = bundled_impl(framework, contract)
    session = Session()
    trips = [0]
    plain = Executor._request

    def counted(self, op, **args):
        trips[0] += 1
        return plain(self, op, **args)
    Executor._request = counted
    try:
        for check in CHECKS:
            run_check(context_for(c, spec, framework, session=session), check)  # warm: imports, compilations
        best = []
        for _ in range(repeats):
            trips[0] = 0
            started = time.perf_counter()
            outcomes = [run_check(context_for(c, spec, framework, session=session), check)["outcome"]
                        for check in CHECKS]
            best.append(time.perf_counter() - started)
        per_check_trips = trips[0] / len(CHECKS)
        layer = session.layer[framework]
        started = time.perf_counter()
        for _ in range(200):
            layer.request("files")
        trip_ms = (time.perf_counter() - started) / 200 * 1000
    finally:
        Executor._request = plain
        session.close()
    return {"per_check_ms": min(best) / len(CHECKS) * 1000, "trips_per_check": per_check_trips,
            "trip_ms": trip_ms, "outcomes": outcomes}


# --- report ------------------------------------------------------------------------------------

def _importable(checkout: Path, scratch: Path) -> Path:
    """Where a run of ``checkout``'s own code starts (its PYTHONPATH and directory). A commit from before the
    installed package's name (``layer_conformance``) is imported as ``harness`` from the checkout itself; a later
    one is assembled as setup.py maps it (harness/ is the package, reference_impls/ and specs/ inside it) in
    ``scratch``, which comes before the editable install of this checkout on sys.path."""
    if not (checkout / "setup.py").exists() or "layer_conformance" not in (checkout / "setup.py").read_text():
        return checkout
    package = scratch / "layer_conformance"
    shutil.copytree(checkout / "harness", package, symlinks=True)
    shutil.copytree(checkout / "reference_impls", package / "reference_impls", symlinks=True)
    shutil.copytree(checkout / "specs", package / "specs", symlinks=True)
    for extra in ("tests", "conftest.py", "pyproject.toml"):   # the bundled matrix's own configuration, if any
        if (checkout / extra).exists():
            os.symlink(checkout / extra, scratch / extra)
    return scratch


def against(rev: str, frameworks: list[str], rounds: int) -> dict:
    """The bundled matrix of this checkout and of commit ``rev`` (a temporary git worktree), run in turn,
    ``rounds`` times each with -n 0 and -n 2: medians, and this checkout's time as a ratio of rev's."""
    import statistics
    out: dict = {"rev": rev, "rounds": rounds}
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "rev"
        subprocess.run(["git", "worktree", "add", "--detach", str(other), rev], cwd=ROOT, check=True,
                       capture_output=True)
        rev_root = _importable(other, Path(tmp) / "rev-package")
        rev_lacks_dtypes = "--dtype" not in (other / "harness" / "plugin.py").read_text()
        out["this_args"] = "--dtype float32" if rev_lacks_dtypes else ""
        try:
            walls: dict = {}
            for _ in range(rounds):
                for label, root in (("this", ROOT), ("rev", rev_root)):
                    for workers in ("0", "2"):
                        with tempfile.TemporaryDirectory() as scratch:
                            # this checkout in the cases' own dtypes only, like a commit from before dtypes
                            m = matrix(frameworks, workers, Path(scratch), root=root,
                                       extra=(("--dtype", "float32") if label == "this" and rev_lacks_dtypes else ()))
                        walls.setdefault((label, workers), []).append(m["wall_s"])
                        out.setdefault("summaries", {})[f"{label} -n {workers}"] = m["summary"]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, capture_output=True)
    med = {f"{k[0]} -n {k[1]}": statistics.median(v) for k, v in walls.items()}
    out.update(median_s=med, walls=({f"{k[0]} -n {k[1]}": v for k, v in walls.items()}),
               ratio_n0=med["this -n 0"] / med["rev -n 0"], ratio_n2=med["this -n 2"] / med["rev -n 2"],
               speedup_this=med["this -n 0"] / med["this -n 2"], speedup_rev=med["rev -n 0"] / med["rev -n 2"])
    return out


def dtypes(frameworks: list[str], rounds: int) -> dict:
    """The bundled matrix at -n 0 in the cases' own dtypes only (``--dtype float32``) and with every
    dtype the contracts declare, run in turn: medians, checks run, and the time per check of each."""
    import statistics
    walls: dict = {"own dtype": [], "all dtypes": []}
    summaries: dict = {}
    for _ in range(rounds):
        for label, extra in (("own dtype", ("--dtype", "float32")), ("all dtypes", ())):
            with tempfile.TemporaryDirectory() as scratch:
                m = matrix(frameworks, "0", Path(scratch), extra=extra)
                records = json.loads((Path(scratch) / "results-n0.json").read_text())["results"]
            walls[label].append(m["wall_s"])
            summaries[label] = (m["summary"], len(records))
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {"median_s": med, "walls": walls, "summaries": summaries,
            "ratio": med["all dtypes"] / med["own dtype"],
            "records_ratio": summaries["all dtypes"][1] / summaries["own dtype"][1]}


def sandbox_cost(frameworks: list[str], rounds: int) -> dict:
    """The bundled matrix at -n 0 with ``--sandbox off`` and with the sandbox this machine allows (``auto``),
    interleaved, ``rounds`` times each: medians, and the sandbox's cost per target (an implementation bound to a
    contract in one framework). Both runs give each implementation its own layer executor; against a commit
    from before that, ``--against REV`` measures what the per-target executors cost."""
    import statistics
    walls: dict = {"off": [], "auto": []}
    targets, sandbox, summaries = 0, None, {}
    for _ in range(rounds):
        for mode in ("off", "auto"):
            with tempfile.TemporaryDirectory() as scratch:
                m = matrix(frameworks, "0", Path(scratch), extra=("--sandbox", mode))
                doc = json.loads((Path(scratch) / "results-n0.json").read_text())
            walls[mode].append(m["wall_s"])
            summaries[mode] = m["summary"]
            targets = len({(r["contract"], r["impl"], r["framework"]) for r in doc["results"]})
            if mode == "auto":
                sandbox = (doc.get("environment") or {}).get("sandbox")
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {"median_s": med, "walls": walls, "summaries": summaries, "targets": targets, "sandbox": sandbox,
            "ratio": med["auto"] / med["off"], "per_target_s": (med["auto"] - med["off"]) / max(targets, 1)}


# What each framework's own figure runs, for the inner loop: the import of the framework, or (Keras) its own
# layer test on its RMSNormalization, with the training and mixed-precision checks.
_OWN_IMPORT = {"torch": "import torch", "tensorflow": "import keras", "jax": "from flax import nnx",
               "mxnet": "import mxnet"}
_KERAS_LAYER_TEST = """
import keras
from keras.src.testing import TestCase
class LayerTest(TestCase):
    def runTest(self):
        self.run_layer_test(keras.layers.RMSNormalization, init_kwargs={"axis": -1, "epsilon": 1e-6},
                            input_shape=(16, 8), expected_output_shape=(16, 8), expected_num_trainable_weights=1,
                            run_training_check=True, run_mixed_precision_check=True)
result = LayerTest().run()
assert result.wasSuccessful(), result.errors + result.failures
"""
# the bundled Keras layer builds its width from its input: the contract's d is dropped, as a user would
_OWN_ARGS = {"tensorflow": ("--arg-map", "d=")}
_MUTANT_MODULE = {"torch": "torch_mutants", "tensorflow": "tensorflow_mutants", "jax": "jax_mutants",
                  "mxnet": "mxnet_mutants"}


def _until_first_failure(cmd: list[str], cwd: Path, env: dict, timeout=900) -> tuple[float | None, float]:
    """(seconds from the start to the first failed check in pytest's progress output, or None; the whole
    run's wall time): what a user editing a broken layer waits before seeing that it is broken."""
    started = time.perf_counter()
    first = None
    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    progress = re.compile(r"^[.sFExXb]+(\s+\[\s*\d+%\])?$")
    buffer = ""
    while True:
        ch = proc.stdout.read(1)
        if not ch:
            break
        buffer = "" if ch == "\n" else buffer + ch
        if first is None and ch in "FE" and progress.match(buffer):
            first = time.perf_counter() - started
    proc.wait(timeout=timeout)
    return first, time.perf_counter() - started


def inner_loop(frameworks: list[str], rounds: int) -> dict:
    """Per framework, interleaved, ``rounds`` times (medians): one bundled layer checked by one user command
    (every default check, every declared dtype, -n 0, from an empty directory), against the framework's own
    figure (its import; Keras' own layer test); and a broken layer (eps outside the square root): the time to
    its first failure against the import."""
    import statistics
    from layer_conformance.targets import bundled_impl
    out: dict = {}
    for fw in frameworks:
        walls: dict = {"own": [], "import": [], "check": [], "first_failure": [], "broken_run": [], "warm": [],
                       "warm_first_failure": []}
        with tempfile.TemporaryDirectory() as user:
            # a registry of its own for --keep-warm's zygotes, ended below
            env = {"PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(Path(user) / ".cache")}
            # hypothesis comes with the harness's test extra, not with a user's install; its pytest plugin
            # imports it at the end of every run (about 1 s), so the user's run is measured without it
            base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q",
                    "-n", "0", "--contract",
                    "rmsnorm", "--framework", fw]
            for _ in range(rounds):
                walls["import"].append(_run([sys.executable, "-c", _OWN_IMPORT[fw]], cwd=user)[0])
                if fw == "tensorflow":
                    walls["own"].append(_run([sys.executable, "-c", _KERAS_LAYER_TEST], cwd=user)[0])
                wall, proc = _run(base + ["--impl", bundled_impl(fw, "rmsnorm"), *_OWN_ARGS.get(fw, ())],
                                  cwd=user, env=env)
                walls["check"].append(wall)
                summary = _last_line(proc.stdout)
                first, whole = _until_first_failure(
                    base + ["--impl", f"tests.mutants.{_MUTANT_MODULE[fw]}:EpsOutsideSqrt", *_OWN_ARGS.get(fw, ())],
                    Path(user), env)
                if not summary or "passed" not in summary:
                    raise SystemExit(f"{fw}: the correct layer's run did not pass: {proc.stdout[-2000:]}")
                walls["first_failure"].append(first if first is not None else float("nan"))
                walls["broken_run"].append(whole)
            # the same with --keep-warm, each run after one that kept the zygote (the rerun as a user edits)
            warm = base + ["--keep-warm", *_OWN_ARGS.get(fw, ())]
            _run(warm + ["--impl", bundled_impl(fw, "rmsnorm")], cwd=user, env=env)
            for _ in range(rounds):
                wall, proc = _run(warm + ["--impl", bundled_impl(fw, "rmsnorm")], cwd=user, env=env)
                if "kept from an earlier run" not in proc.stdout:
                    raise SystemExit(f"{fw}: --keep-warm's run did not fork from the kept zygote: {proc.stdout[-2000:]}")
                walls["warm"].append(wall)
                first, _ = _until_first_failure(warm + ["--impl", f"tests.mutants.{_MUTANT_MODULE[fw]}:EpsOutsideSqrt"],
                                                Path(user), env)
                walls["warm_first_failure"].append(first if first is not None else float("nan"))
            _run([sys.executable, "-m", "layer_conformance", "warm", "--stop"], cwd=user, env=env)
        med = {k: statistics.median(v) for k, v in walls.items() if v}
        against = med.get("own", med["import"])
        out[fw] = {"median_s": med, "walls": walls, "summary": summary, "ratio": med["check"] / against,
                   "warm_ratio": med["warm"] / against, "warm_first_failure_ratio": med["warm_first_failure"] / med["import"],
                   "against": "Keras' run_layer_test" if "own" in med else "the import",
                   "first_failure_ratio": med["first_failure"] / med["import"]}
    return out


# the cold per-binding cost a repository of many layers pays for one more (issue 47's bounds, seconds)
MARGINAL_BOUND_S = {"torch": 1.5, "tensorflow": 1.5, "jax": 2.0}


def marginal(frameworks: list[str], rounds: int, many: int = 8) -> dict:
    """Per framework, interleaved, ``rounds`` times (medians): one command over a bindings file of 1 layer, and one
    over ``many`` layers, each a module of its own in the user's directory (a copy of the bundled rmsnorm: as a
    repository of layers holds them), cold (a run that starts its zygote); the cost of one more binding is
    (wall(many) - wall(1)) / (many - 1)."""
    import statistics
    import yaml
    from layer_conformance.targets import bundled_impl
    out: dict = {}
    for fw in frameworks:
        walls: dict = {"one": [], "many": []}
        summaries: dict = {}
        with tempfile.TemporaryDirectory() as user:
            env = {"PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(Path(user) / ".cache")}
            module, _, attr = bundled_impl(fw, "rmsnorm").partition(":")
            source = Path(__import__("importlib").util.find_spec(module).origin).read_text()
            arg_map = {"d": ""} if fw == "tensorflow" else None
            for i in range(many):
                (Path(user) / f"mylayer{i}.py").write_text(source)
            for label, n in (("one", 1), ("many", many)):
                entries = [{"contract": "rmsnorm", "impl": f"mylayer{i}:{attr}", "framework": fw,
                            **({"arg_map": arg_map} if arg_map else {})} for i in range(n)]
                (Path(user) / f"{label}.yaml").write_text(yaml.safe_dump(entries))
            for _ in range(rounds):
                for label in ("one", "many"):
                    wall, proc = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                                       "no:hypothesispytest", "-q", "-n", "0", "--bindings", f"{label}.yaml"],
                                      cwd=user, env={**env, "PYTHONPATH": f"{user}{os.pathsep}{ROOT}"})
                    summary = _last_line(proc.stdout)
                    if not summary or "passed" not in summary or "failed" in summary:
                        raise SystemExit(f"{fw}: the {label}-binding run did not pass: {proc.stdout[-2000:]}")
                    walls[label].append(wall)
                    summaries[label] = summary
        med = {k: statistics.median(v) for k, v in walls.items()}
        per = (med["many"] - med["one"]) / (many - 1)
        out[fw] = {"median_s": med, "walls": walls, "summaries": summaries, "many": many, "per_binding_s": per,
                   "bound_s": MARGINAL_BOUND_S.get(fw)}
    return out


def opt_in(frameworks: list[str], rounds: int = 1, singles: bool = True) -> dict:
    """The bundled matrix at -n 0 with the default checks, then with each opt-in check added, in turn; then
    the default checks without and with ``compiled`` and ``export`` at -n 2, as scripts/conformance.sh runs it.
    With ``rounds`` > 1 the runs without and with both checks are repeated, interleaved (medians): single runs
    on a shared machine vary by about 10 %."""
    import statistics
    from layer_conformance.checks import CHECKS, DEFAULT_CHECKS
    walls: dict = {}
    base = [c for c in DEFAULT_CHECKS if c not in ("compiled", "export")]  # the matrix before the two
    both = ["compiled", "export"]
    with tempfile.TemporaryDirectory() as tmp:
        def run(label, workers, checks):
            walls.setdefault(label, []).append(matrix(frameworks, workers, Path(tmp), checks=checks)["wall_s"])
        for n in range(rounds):
            run("default", "0", base)
            if n == 0 and singles:
                for check in [c for c in CHECKS if c not in base]:
                    run(check, "0", base + [check])
            run(" + ".join(both), "0", base + both)
            run("-n 2 default", "2", base)
            run("-n 2 " + " + ".join(both), "2", base + both)
    return {"median_s": {k: statistics.median(v) for k, v in walls.items()}, "walls": walls}


# the default checks of the axes beside torch's ModuleInfo, Keras and JAX (batching; abstract, layout,
# construction and aliasing as they land): together at most 1.3x the default matrix without them
NEW_AXES = ("batching", "abstract", "layout", "aliasing", "construction")
NEW_AXES_BOUND = 1.3


def new_axes(frameworks: list[str], rounds: int) -> dict:
    """The bundled matrix at -n 0 with the default checks but NEW_AXES, then with every default check, in turn
    (interleaved, medians): what the new axes add, side by side."""
    import statistics
    from layer_conformance.checks import DEFAULT_CHECKS
    without = [c for c in DEFAULT_CHECKS if c not in NEW_AXES]
    walls: dict = {"without": [], "with": []}
    summaries: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for label, checks in (("without", without), ("with", list(DEFAULT_CHECKS))):
                m = matrix(frameworks, "0", Path(tmp), checks=checks)
                walls[label].append(m["wall_s"])
                summaries[label] = m["summary"]
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {"median_s": med, "walls": walls, "summaries": summaries, "ratio": med["with"] / med["without"],
            "axes": list(NEW_AXES)}


# the bundled contracts of issue 46 §6 (contracts for the layers people write): what they add to the matrix
NEW_CONTRACTS = ("layernorm", "groupnorm", "gradient_reversal", "swiglu", "geglu", "rotary", "causal_attention")


def new_contracts(frameworks: list[str], rounds: int) -> dict:
    """The bundled matrix at -n 0 without NEW_CONTRACTS (deselected by -k), then with them, in turn (interleaved,
    medians): what they add, side by side, with the seconds their checks' calls took in the run with them."""
    import statistics
    from layer_conformance.contract import bundled_contracts
    names = [n for n in NEW_CONTRACTS if n in bundled_contracts()]
    walls: dict = {"without": [], "with": []}
    summaries: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for label, extra in (("without", ("-k", " and ".join(f"not {n}" for n in names))), ("with", ())):
                m = matrix(frameworks, "0", Path(tmp), extra=extra)
                walls[label].append(m["wall_s"])
                summaries[label] = m["summary"]
    med = {k: statistics.median(v) for k, v in walls.items()}
    return {"median_s": med, "walls": walls, "summaries": summaries, "contracts": names,
            "added_s": med["with"] - med["without"], "ratio": med["with"] / med["without"]}


def _print_new_contracts(a: dict, rounds: int) -> None:
    for k, v in a["median_s"].items():
        print(f"matrix -n 0, {k} the new contracts: {v:7.1f} s (median of {rounds}: "
              f"{', '.join(f'{w:.1f}' for w in a['walls'][k])})   {a['summaries'][k]}")
    print(f"the new contracts ({', '.join(a['contracts'])}) add {a['added_s']:.1f} s, {a['ratio']:.2f}x the matrix")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frameworks", help="comma-separated (default: every installed framework)")
    ap.add_argument("--skip-matrix", action="store_true", help="skip the matrix, floor and overhead")
    ap.add_argument("--checks", type=int, default=10_000, help="size of the synthetic matrix to collect")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--floor-only", help=argparse.SUPPRESS)
    ap.add_argument("--against", metavar="REV", help="only the bundled matrix, side by side with commit REV")
    ap.add_argument("--rounds", type=int, default=None,
                    help="runs of each, medians (--against and --dtypes: default 2; --opt-in: default 1, the runs "
                         "without and with compiled + export)")
    ap.add_argument("--dtypes", action="store_true",
                    help="only the matrix (-n 0) in the cases' own dtypes and in every declared dtype, side by side")
    ap.add_argument("--sandbox", action="store_true",
                    help="only the matrix (-n 0) without and with the executors' sandbox: its cost per target")
    ap.add_argument("--inner-loop", action="store_true",
                    help="only one layer per framework checked by one command, against the framework's own figure "
                         "(import; Keras' run_layer_test), and a broken layer's time to its first failure")
    ap.add_argument("--new-axes", action="store_true",
                    help="only the matrix (-n 0) without and with the default checks of the new axes, side by side")
    ap.add_argument("--new-contracts", action="store_true",
                    help="only the matrix (-n 0) without and with the newest bundled contracts (NEW_CONTRACTS), side by side")
    ap.add_argument("--opt-in", action="store_true", help="only what each opt-in check adds to the matrix (-n 0), and compiled + export at -n 2")
    ap.add_argument("--both-only", action="store_true",
                    help="with --opt-in: only the runs without and with compiled + export (-n 0 and -n 2)")
    args = ap.parse_args(argv)

    if args.floor_only:  # the child process of floor()
        print(json.dumps(floor_in_this_process(args.floor_only.split(","))))
        return 0

    frameworks = args.frameworks.split(",") if args.frameworks else _installed_frameworks()
    if args.opt_in:
        args.rounds = args.rounds or 1
    args.rounds = args.rounds or 2
    if args.against:
        a = against(args.against, frameworks, args.rounds)
        for k, v in a["median_s"].items():
            print(f"matrix {k:<10} {v:7.1f} s (median of {args.rounds}: {', '.join(f'{w:.1f}' for w in a['walls'][k])})"
                  f"   {a['summaries'][k]}")
        print(f"this / {args.against}: -n 0 {a['ratio_n0']:.2f}x, -n 2 {a['ratio_n2']:.2f}x; -n 2 speed-up: this "
              f"{a['speedup_this']:.2f}x, {args.against} {a['speedup_rev']:.2f}x")
        if args.json:
            Path(args.json).write_text(json.dumps(a, indent=2))
        return 0
    if args.dtypes:
        d = dtypes(frameworks, args.rounds)
        for k, v in d["median_s"].items():
            summary, n = d["summaries"][k]
            print(f"matrix -n 0, {k:<10} {v:7.1f} s (median of {args.rounds}: "
                  f"{', '.join(f'{w:.1f}' for w in d['walls'][k])})   {n} records, {1000 * v / n:.0f} ms per record"
                  f"   {summary}")
        print(f"all dtypes / own dtype: {d['ratio']:.2f}x the time for {d['records_ratio']:.2f}x the records")
        if args.json:
            Path(args.json).write_text(json.dumps(d, indent=2))
        return 0
    if args.inner_loop:
        il = inner_loop(frameworks, args.rounds)
        for fw, r in il.items():
            m = r["median_s"]
            own = f"Keras' run_layer_test {m['own']:.1f} s, " if "own" in m else ""
            print(f"{fw}: one layer {m['check']:.1f} s ({r['summary']}); {own}import {m['import']:.1f} s: "
                  f"{r['ratio']:.2f}x {r['against']}; a broken layer's first failure at {m['first_failure']:.1f} s "
                  f"({r['first_failure_ratio']:.2f}x the import; its run {m['broken_run']:.1f} s); with --keep-warm "
                  f"{m['warm']:.1f} s ({r['warm_ratio']:.2f}x {r['against']}), first failure at "
                  f"{m['warm_first_failure']:.1f} s ({r['warm_first_failure_ratio']:.2f}x the import) "
                  f"(medians of {args.rounds})")
        mc = marginal(frameworks, args.rounds)
        for fw, r in mc.items():
            m, bound = r["median_s"], r["bound_s"]
            verdict = "" if bound is None else f" (bound {bound:.1f} s: {'met' if r['per_binding_s'] <= bound else 'missed'})"
            print(f"{fw}: one more binding costs {r['per_binding_s']:.2f} s cold{verdict}: 1 binding {m['one']:.1f} s, "
                  f"{r['many']} bindings {m['many']:.1f} s (medians of {args.rounds})")
        if args.json:
            Path(args.json).write_text(json.dumps({"inner_loop": il, "marginal": mc}, indent=2))
        return 0
    if args.new_axes:
        a = new_axes(frameworks, args.rounds)
        for k, v in a["median_s"].items():
            print(f"matrix -n 0, {k} {', '.join(a['axes'])}: {v:7.1f} s (median of {args.rounds}: "
                  f"{', '.join(f'{w:.1f}' for w in a['walls'][k])})   {a['summaries'][k]}")
        print(f"the new axes ({', '.join(a['axes'])}) add {a['ratio']:.2f}x (bound {NEW_AXES_BOUND}x: "
              f"{'met' if a['ratio'] <= NEW_AXES_BOUND else 'missed'})")
        if args.json:
            Path(args.json).write_text(json.dumps(a, indent=2))
        return 0
    if args.new_contracts:
        a = new_contracts(frameworks, args.rounds)
        _print_new_contracts(a, args.rounds)
        if args.json:
            Path(args.json).write_text(json.dumps(a, indent=2))
        return 0
    if args.sandbox:
        c = sandbox_cost(frameworks, args.rounds)
        for mode, wall in c["median_s"].items():
            label = f"--sandbox {mode}" + (f" ({c['sandbox']})" if mode == "auto" else "")
            print(f"matrix -n 0, {label:<38} {wall:7.1f} s (median of {args.rounds}: "
                  f"{', '.join(f'{w:.1f}' for w in c['walls'][mode])})   {c['summaries'][mode]}")
        print(f"sandbox: {c['ratio']:.2f}x the matrix, {c['per_target_s']:+.2f} s per target ({c['targets']} targets)")
        if args.json:
            Path(args.json).write_text(json.dumps(c, indent=2))
        return 0
    if args.opt_in:
        o = opt_in(frameworks, args.rounds, singles=not args.both_only)

        def runs(label):
            w = o["walls"][label]
            return f" (median of {len(w)}: {', '.join(f'{x:.1f}' for x in w)})" if len(w) > 1 else ""
        for workers in ("0", "2"):
            key = "default" if workers == "0" else "-n 2 default"
            default = o["median_s"][key]
            print(f"matrix -n {workers}, the other checks: {default:.1f} s{runs(key)}")
            for label, wall in o["median_s"].items():
                check = label if workers == "0" else label[len("-n 2 "):]
                if "default" not in label and label.startswith("-n 2 ") == (workers == "2"):
                    print(f"  + {check:<20} {wall:7.1f} s ({wall / default:.2f}x){runs(label)}")
        if args.json:
            Path(args.json).write_text(json.dumps(o, indent=2))
        return 0
    grad_fw = "torch" if "torch" in frameworks else frameworks[0]
    figures: dict = {"frameworks": frameworks, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    print(f"frameworks: {', '.join(frameworks)}; {os.cpu_count()} CPUs; Python {figures['python']}")

    if not args.skip_matrix:
        with tempfile.TemporaryDirectory() as tmp:
            m0 = matrix(frameworks, "0", Path(tmp))
            m2 = matrix(frameworks, "2", Path(tmp))
        fl = floor(frameworks)
        print(f"\nmatrix  -n 0: {m0['wall_s']:7.1f} s   exit {m0['exit']}   {m0['summary']}")
        print(f"matrix  -n 2: {m2['wall_s']:7.1f} s   exit {m2['exit']}   {m2['summary']}")
        calls = sum(m0["calls_s"].values())
        if calls and "session_s" in m0:
            by_fw = ", ".join(f"{k} {v:.1f} s" for k, v in sorted(m0["calls_s"].items(), key=lambda kv: -kv[1]))
            print(f"  -n 0 taken apart: start-up (interpreter, pytest, plugins) {m0['startup_s']:.1f} s; configure "
                  f"(plan, validate contracts) {m0['configure_s']:.1f} s; checks' calls {calls:.1f} s ({by_fw}; a "
                  f"framework's first check imports it); rest of the session {m0['session_s'] - calls:.1f} s; "
                  f"terminal summary {m0['summary_s']:.1f} s; interpreter exit {m0['exit_s']:.1f} s")
            print(f"  -n 2 groups one framework per worker: at best {calls:.1f} / {max(m0['calls_s'].values()):.1f} = "
                  f"{calls / max(m0['calls_s'].values()):.2f}x on the checks' calls")
        imports = ", ".join(f"{k} {v:.1f} s" for k, v in fl["import_s"].items())
        compute = ", ".join(f"{k} {v:.1f} s ({fl['layers'][k]} layers)" for k, v in fl["compute_s"].items())
        print(f"floor       : {fl['wall_s']:7.1f} s   (imports: {imports}; computations: {compute})")
        for f in fl["failed"]:
            print(f"  floor could not drive {f}")
        overhead = m0["wall_s"] / fl["wall_s"]
        speedup = m0["wall_s"] / m2["wall_s"]
        print(f"overhead    : {overhead:7.2f} x floor      (target <= {TARGETS['overhead']}x: "
              f"{'met' if overhead <= TARGETS['overhead'] else 'MISSED'})")
        if calls and "session_s" in m0:
            own = m0["wall_s"] - calls
            print(f"  the harness's own time (wall - checks' calls) {own:.1f} s = {own / fl['wall_s']:.2f}x floor")
        print(f"-n 2 speedup: {speedup:7.2f} x            (target >= {TARGETS['speedup']}x: "
              f"{'met' if speedup >= TARGETS['speedup'] else 'MISSED'})")
        figures.update(matrix_n0=m0, matrix_n2=m2, floor=fl, overhead=overhead, speedup=speedup)

    coll = collection(args.checks, grad_fw)
    print(f"\ncollection (pytest --collect-only -q --bindings, {grad_fw}; timed inside pytest):")
    print(f"  {'':<52}{'items':>6}  {'wall':>7}  {'configure':>9}  {'collect':>7}")
    for row in coll:
        if row["collect_s"] is None:
            print(f"  {row['label']:<52} failed (exit {row['exit']}): {row['tail']}")
            continue
        print(f"  {row['label']:<52}{row['collected']:>6}  {row['wall_s']:6.2f}s  {row['configure_s']:8.2f}s  "
              f"{row['collect_s']:6.2f}s")
    done = [r for r in coll[1:] if r["collect_s"] is not None]
    if done:
        worst = max(r["collect_s"] for r in done)
        print(f"  pytest's collection of {args.checks} checks: {worst:.2f} s at most   (target < "
              f"{TARGETS['collection_s']} s: {'met' if worst < TARGETS['collection_s'] else 'MISSED'}); "
              f"configure includes validating every contract")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("  note: PYTHONDONTWRITEBYTECODE is set, so every process compiles (and pytest re-rewrites) "
              "its modules from source")
    figures["collection"] = coll

    grads = gradient_scaling(grad_fw)
    print(f"\ngradients check ({grad_fw} rmsnorm, best of 3):")
    for row in grads:
        print(f"  {row['elements']:>6} elements  {row['best_s'] * 1000:8.1f} ms   {row['outcome']}")
    ratio = grads[-1]["best_s"] / grads[0]["best_s"]
    print(f"  {grads[-1]['elements']} / {grads[0]['elements']} elements: {ratio:.2f}x the time")
    figures["gradients"] = grads

    cost = boundary(grad_fw)
    print(f"\nprocess boundary ({grad_fw} rmsnorm, every check, warm, best of 3):")
    print(f"  {cost['per_check_ms']:7.1f} ms per check; {cost['trips_per_check']:.1f} round trips per check at "
          f"{cost['trip_ms']:.2f} ms each on their own: the boundary is "
          f"{cost['trips_per_check'] * cost['trip_ms'] / cost['per_check_ms']:.0%} of a check")
    figures["boundary"] = cost

    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
