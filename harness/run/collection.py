"""The collection phase: contract files as collectors, one item per check, their order, and the plan.

Node ids read like the domain and are identical on every xdist worker:
``specs/rmsnorm.yaml::rmsnorm[torch-cpu]::serialization``. The plan (every check this run will execute, and the
n/a records of those never collected) is made once, frozen, and stashed (``PLAN_KEY``); the running phase is told
of it through ``pytest_conformance_planned`` (layer_conformance.hookspecs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ..contract import ContractError
from ..nodeids import parse as parse_nodeid
from .configure import CONFIGURED_KEY, EXECUTORS_KEY, Configured, covers, is_worker
from .executors import Executors, start_rank
from .handover import DESELECTED_KEY, PLAN_KEY, Plan, run_deselected
from .records import target_record
from .running import ConformanceItem


def _file_nodeid(config, path: Path, initial_paths) -> str:
    """A contract file's node id as pytest gives it: relative to the rootdir, else to the collection argument
    (a contract directory) it lies in."""
    for base in [config.rootpath, *initial_paths]:
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            continue
    return path.as_posix()


def checks_of(run: Configured, target, contract, dtype):
    """(check, why it can never run there, or None) for each check of a target node, decided from the contract
    (a bundled target in a framework the contract is not for, then layer_conformance.checks.applicable)."""
    from ..checks import PER_DTYPE
    from ..checks.applicable import contract_says
    for check in run.checks:
        if dtype is not None and check not in PER_DTYPE:
            continue
        said = contract_says(contract, check, target.framework, whole_framework=target.bundled or not target.impl)
        if not target.impl and not (said and said["not_applicable"]):   # (a contract that did not load)
            said = {"not_applicable": True, "message": f"not applicable in {target.framework}: None"}
        # n/a only: a check the contract skips (checks.<id>.skip) is collected, and the runner skips it
        yield check, said["message"] if said and said["not_applicable"] else None


def not_applicable(run: Configured, config) -> tuple:
    """The n/a records of the checks that are never collected: the matrix shows them, with their reason."""
    out = []
    for key in run.paths:
        contract = run.contracts[key]
        file_id = _file_nodeid(config, Path(key), run.contract_dirs)
        for t, name, device, dtype, _ in run.target_nodes(key, contract):
            out += [target_record(run, t, contract, device, dtype, check, outcome="skipped", message=reason,
                                  nodeid=f"{file_id}::{name}::{check}", not_applicable=True, na_source="contract")
                    for check, reason in checks_of(run, t, contract, dtype) if reason]
    return tuple(out)


class Collection:
    """The collection phase's hooks (registered where the run is active)."""

    def __init__(self, config, run: Configured, executors: Executors):
        self.config, self.run, self.executors = config, run, executors

    def pytest_ignore_collect(self, collection_path, config):
        run = self.run
        path = str(collection_path)
        if path in run.path_set or path in run.ancestors:
            return None
        resolved = collection_path.resolve()
        if str(resolved) in run.path_set or str(resolved) in run.ancestors:
            return None
        # the user's own tests are collected as pytest would without this plugin
        if run.user_paths and (covers(run.user_paths, resolved) or any(resolved in u.parents for u in run.user_paths)):
            return None
        # anything else is reached only through a contract directory added for the contract files in it
        return True if run.alone or covers(run.contract_dirs, resolved) else None

    def pytest_collect_file(self, file_path, parent):
        if str(file_path.resolve()) in self.run.path_set:
            return ContractFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, session, config, items):
        """With -n 0 the checks run framework by framework, in the order their executors start (see
        ``Framework.start_rank``): one framework's checks run while the next one's executors import it.
        Within a framework the checks that fork fresh processes come last: the zygote they fork from starts
        after the framework's other executors, and the first target's would otherwise wait for its import.
        The ALONGSIDE checks, where the run has others, run on a second lane (layer_conformance.lane): their items
        come after all the others and collect the verdicts.
        Under xdist the scheduler (layer_conformance.scheduling) decides, and the order stays as collected.
        It reorders after every other plugin's hook (a wrapper, after its yield): a shard's selection
        (pytest-split) is then made on the collected order, the same with -n 0 as under xdist."""
        from ..checks import ALONGSIDE, FRESH_PROCESS
        result = yield
        if is_worker(config) or config.getoption("numprocesses", None):
            return result
        slots = [i for i, item in enumerate(items) if isinstance(item, ConformanceItem)]
        checks = {items[i].check for i in slots}
        # the ALONGSIDE checks run on a second lane where the run also has others to run beside them
        alongside = set(ALONGSIDE) & checks if checks - set(ALONGSIDE) else set()
        if alongside and not config.option.collectonly:
            self.executors.open_lane(alongside)
        ours = sorted((items[i] for i in slots), key=lambda item: (item.check in alongside,
                                                                   start_rank(item.parent.target.framework),
                                                                   item.check in FRESH_PROCESS))
        for i, item in zip(slots, ours):  # other items keep their places
            items[i] = item
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        # under xdist the workers collect, and the plan comes from them (pytest_xdist_node_collection_finished)
        if not is_worker(session.config) and (session.items or not session.config.getoption("numprocesses", None)):
            self._plan([item.nodeid for item in session.items if isinstance(item, ConformanceItem)])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self._plan(list(ids))

    def pytest_deselected(self, items):
        if items:
            self.config.stash[DESELECTED_KEY] = run_deselected(self.config) | {i.nodeid for i in items}

    def _plan(self, nodeids):
        """Before any check runs: the plan, made once."""
        if PLAN_KEY in self.config.stash:
            return
        plan = Plan(planned=tuple(n for n in nodeids if parse_nodeid(n) is not None),
                    not_applicable=not_applicable(self.run, self.config))  # no item, no plan entry
        self.config.stash[PLAN_KEY] = plan
        self.config.hook.pytest_conformance_planned(config=self.config, plan=plan)


class ContractFile(pytest.File):
    def collect(self):
        run = self.config.stash[CONFIGURED_KEY]
        key = str(self.path.resolve())
        from ..reference_check import load_checked
        contract = run.contracts.get(key) or load_checked(self.path, run.max_input_elements, run.budget,
                                                          raw=run.inputs.raw(self.path), pythons=run.pythons)
        for t, name, device, dtype, impl in run.target_nodes(key, contract):
            yield TargetNode.from_parent(self, name=name, target=t, contract=contract, device=device,
                                         impl_label=impl, dtype=dtype)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ContractError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class TargetNode(pytest.Collector):
    """One target: an implementation on a framework and device, in the cases' own dtype (``dtype`` None)
    or in one the contract's ``dtypes`` adds, where it holds only the per-dtype checks."""

    def __init__(self, *, target, contract, device, impl_label, dtype=None, **kw):
        super().__init__(**kw)
        self.target, self.contract, self.device, self.impl_label = target, contract, device, impl_label
        self.dtype = dtype

    def collect(self):
        from ..check_catalog import RUN_ORDER
        run = self.config.stash[CONFIGURED_KEY]
        said = sorted(checks_of(run, self.target, self.contract, self.dtype),
                      key=lambda c: RUN_ORDER.index(c[0]) if c[0] in RUN_ORDER else len(RUN_ORDER))
        for check, not_applicable_ in said:
            if not_applicable_:
                continue   # no item for what can never run: the results show it n/a (the plan's not_applicable)
            item = ConformanceItem.from_parent(self, name=check, check=check)
            item.add_marker(pytest.mark.xdist_group(self.name))  # layer_conformance.scheduling reads the node id
            item.add_marker(pytest.mark.conformance)
            yield item

    def context(self, session=None):
        """The check context: the implementation loaded in its executor (raises LoadFailed); ``session``: whose
        executors (default the run's)."""
        from ..runner import context_for
        run = self.config.stash[CONFIGURED_KEY]
        return context_for(self.contract, self.target.impl, self.target.framework, device=self.device,
                           seed=run.seed, state_map=self.target.state_map, arg_map=self.target.arg_map,
                           impl_name=self.target.impl, dtype=self.dtype,
                           session=session or self.config.stash[EXECUTORS_KEY].session
                           ).with_options(compile_backend=run.compile_backend)
