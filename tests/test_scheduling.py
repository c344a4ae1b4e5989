"""xdist scheduling: one target's checks on one worker, and a worker kept on the frameworks whose
executors it has started (each framework's executors start about once per run, not once per worker)."""
from __future__ import annotations

from types import SimpleNamespace

from layer_conformance.scheduling import FrameworkGroupScheduling
from tests.support import ROOT, pytest_run


class _Node:
    def __init__(self, name):
        self.name, self.shutting_down, self.sent = name, False, []
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indexes):
        self.sent.extend(indexes)

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self):
        return self.name


def _config(workers):
    option = SimpleNamespace(loadscopereorder=True, numprocesses=workers, tx=[f"{workers}*popen"], dist="loadgroup")
    return SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name, None))


def _collection(frameworks, contracts=("a", "b", "c", "d"), checks=("values", "gradients", "state", "native")):
    return [f"specs/{c}.yaml::{c}[{fw}-cpu]::{check}" for fw in frameworks for c in contracts for check in checks]


def _frameworks_run_by(sched, collection, node):
    return {collection[i].split("[")[1].split("-")[0] for i in node.sent}


def _drain(sched, nodes, collection):
    """Finish every assigned check, node by node in turn, as workers report them."""
    progress = True
    while progress:
        progress = False
        for node in nodes:
            work = sched.assigned_work[node]
            pending = [(scope, nid) for scope, unit in work.items() for nid, done in unit.items() if not done]
            if pending:
                scope, nid = pending[0]
                sched.mark_test_complete(node, collection.index(nid))
                progress = True


def _scheduled(collection):
    sched = FrameworkGroupScheduling(_config(2))
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    return sched, nodes


def test_each_framework_starts_on_one_worker_while_others_have_work():
    collection = _collection(["torch", "tensorflow", "jax", "mxnet"])
    sched, nodes = _scheduled(collection)
    first = [_frameworks_run_by(sched, collection, n) for n in nodes]
    assert all(len(f) == 1 for f in first) and first[0] != first[1], first
    _drain(sched, nodes, collection)
    assert sum(len(n.sent) for n in nodes) == len(collection)
    a, b = (_frameworks_run_by(sched, collection, n) for n in nodes)
    # four frameworks over two workers: each framework's targets on one worker (its executors start once)
    assert not (a & b), (a, b)


def test_a_worker_without_a_new_framework_helps_with_another():
    collection = _collection(["torch"])  # one framework, more targets than workers: both workers run it
    sched, nodes = _scheduled(collection)
    _drain(sched, nodes, collection)
    assert all(n.sent for n in nodes)
    assert sum(len(n.sent) for n in nodes) == len(collection)


def test_one_process_runs_framework_by_framework_in_start_order():
    """With -n 0 the checks run framework by framework, quickest import first: one framework's checks run
    while the next framework's executors start (contract-major order made the first contract wait for
    every framework's executors)."""
    from layer_conformance.frameworks import FRAMEWORKS
    done = pytest_run("--collect-only", "-q", "-n", "0", "--dtype", "float32", "--framework", "torch",
                      "--framework", "tensorflow", "--framework", "jax", cwd=ROOT, timeout=300)
    from layer_conformance.checks import ALONGSIDE
    ids = [ln for ln in done.stdout.splitlines() if "::" in ln]
    lane = [i.rpartition("::")[2] in ALONGSIDE for i in ids]
    assert lane == sorted(lane), "the second lane's items (layer_conformance.lane) come after all the others"
    for part in (False, True):  # the main thread's items, then the lane's, each framework by framework
        order = [i.split("[")[1].split("-")[0] for i, on_lane in zip(ids, lane) if on_lane is part]
        runs = [fw for n, fw in enumerate(order) if n == 0 or order[n - 1] != fw]
        assert runs == sorted(set(order), key=lambda fw: FRAMEWORKS[fw].start_rank), runs
        assert len(runs) == 3, done.stdout[-2000:]


def test_one_process_runs_a_frameworks_fresh_process_checks_after_its_others():
    """With -n 0 the checks that fork fresh processes come last in each framework's run: the zygote they fork
    from starts after the framework's other executors, and the first target's export check waited for its
    import (8 s of JAX's run, measured)."""
    from layer_conformance.checks import FRESH_PROCESS
    done = pytest_run("--collect-only", "-q", "-n", "0", "--dtype", "float32", "--framework", "torch",
                      "--framework", "jax", "--check", "values", "--check", "export", "--check", "gradients",
                      cwd=ROOT, timeout=300)
    ids = [ln for ln in done.stdout.splitlines() if "::" in ln]
    by_framework: dict = {}
    for i in ids:
        by_framework.setdefault(i.split("[")[1].split("-")[0], []).append(i.rpartition("::")[2] in FRESH_PROCESS)
    assert sorted(by_framework) == ["jax", "torch"], done.stdout[-2000:]
    for framework, fresh in by_framework.items():
        assert any(fresh) and not all(fresh), (framework, fresh)
        assert fresh == sorted(fresh), f"{framework}: a fresh-process check runs before another check"
