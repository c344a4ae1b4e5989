"""A check's record from what the run knows of its target (``target_record``), or from its node id alone
(``record_from_nodeid``: a check whose worker died, or that never ran). Both make it with ``record.make``, the one
constructor."""
from __future__ import annotations

from pathlib import Path

from ..nodeids import parse as parse_nodeid
from ..record import Record, make
from .configure import Configured


def target_record(run: Configured, target, contract, device, dtype, check, **fields) -> Record:
    """The record of ``check`` on one target node of ``run`` (``dtype`` None: the cases' own)."""
    return make(contract=contract.name, impl=target.impl or "(not applicable)", framework=target.framework,
                device=device, check=check, dtype=dtype or "",
                options={**target.options(dtype or contract.default_dtype), **run.rerun_options(target.framework)},
                **fields)


def record_from_nodeid(run: Configured, nodeid: str, outcome: str, message: str, **extra) -> Record | None:
    """The record of the check ``nodeid`` (None: no conformance check's node id), as its item would have made it
    where the run knows its target."""
    ids = parse_nodeid(nodeid)
    if ids is None:
        return None
    contract, label, framework, device, check, dtype = (ids[k] for k in ("contract", "impl", "framework", "device",
                                                                         "check", "dtype"))
    contracts = {str(Path(p).resolve()): c for p, c in run.contracts.items()}

    def contract_of(t):
        return contracts.get(str(Path(t.contract_path).resolve()))

    target = next((t for t in run.targets if t.framework == framework
                   and getattr(contract_of(t), "name", Path(t.contract_path).stem) == contract
                   and (not label or label in (t.impl_label, t.impl.replace(":", ".")))), None)
    if target is not None and contract_of(target) is not None:
        # as its item would have recorded it, options included (its reproduction command repeats them)
        return target_record(run, target, contract_of(target), device, dtype, check,
                             outcome=outcome, nodeid=nodeid, message=message, **extra)
    return make(contract=contract, impl=target.impl if target else label or "?", framework=framework,
                device=device, check=check, dtype=dtype, outcome=outcome, nodeid=nodeid, message=message, **extra)
