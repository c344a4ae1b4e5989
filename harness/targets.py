"""What a run checks: (contract, implementation, framework, device) targets.

Built from --impl / --bindings, or, with neither, from the bundled matrix: every bundled
contract against the bundled implementation (``reference_impls/<framework>/<contract>.py``,
attribute ``IMPL``) of every installed framework. Nothing here imports a framework unless
the user's own module does.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import adapters
from .contract import ContractError, bundled_contracts, find_contract, load_contract


class UsageError(Exception):
    """A command-line or bindings problem: one clear sentence, no traceback."""


@dataclass
class Target:
    contract_path: str
    impl: str                  # "module:attr"
    framework: str
    bundled: bool = False
    state_map: dict = field(default_factory=dict)
    file: str | None = None    # where the implementation's module was imported from, when known

    @property
    def impl_label(self) -> str:
        return "reference" if self.bundled else self.impl.rpartition(":")[2]


def resolve_impl(spec: str):
    """Import ``module:attr`` (``attr`` may be dotted) from the current directory or PYTHONPATH,
    in this process: for the harness's own tests. A run imports user code only in executors."""
    if ":" not in spec:
        raise UsageError(f"--impl {spec!r}: expected MODULE:ATTR, e.g. mypkg.layers:RMSNorm")
    mod_name, attr = spec.split(":", 1)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"--impl {spec!r}: cannot import module {mod_name!r}: {exc}") from None
    except Exception as exc:
        raise UsageError(f"--impl {spec!r}: importing {mod_name!r} raised {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--impl {spec!r}: module {mod_name!r} has no attribute {attr!r}") from None
    return obj


def parse_state_map(items) -> dict:
    out = {}
    for item in items or []:
        for pair in str(item).replace(",", " ").split():
            if "=" not in pair:
                raise UsageError(f"--state-map {pair!r}: expected SLOT=NAME, e.g. gain=weight")
            slot, name = pair.split("=", 1)
            out[slot.strip()] = name.strip()
    return out


def parse_pythons(items, root: str) -> dict:
    """``--executor-python mxnet=.venv-mxnet/bin/python`` -> {framework: python}; relative paths
    are taken from the current directory, else from the rootdir (as an ini value would be)."""
    out = {}
    for item in items or []:
        for pair in str(item).split():
            fw, eq, python = pair.partition("=")
            if not eq or fw not in adapters.FRAMEWORKS:
                raise UsageError(f"--executor-python {pair!r}: expected FRAMEWORK=PYTHON with FRAMEWORK one of "
                                 f"{', '.join(adapters.FRAMEWORKS)}")
            path = Path(python).expanduser()
            if not path.is_absolute() and not path.exists():
                path = Path(root) / path
            if not path.exists():
                raise UsageError(f"--executor-python {pair!r}: no Python at {path}")
            out[fw] = str(path)
    return out


def bundled_impl(framework: str, contract: str) -> str | None:
    mod = f"reference_impls.{framework}.{contract}"
    try:
        found = importlib.util.find_spec(mod) is not None
    except ImportError:
        found = False
    return f"{mod}:IMPL" if found else None


def _framework_for(impl_spec: str, requested: list[str], pythons: dict) -> tuple[str, str | None]:
    """The framework of ``module:attr`` and its module's file, asked of an executor that imports it
    (this process never imports the code under test)."""
    if ":" not in impl_spec:
        raise UsageError(f"--impl {impl_spec!r}: expected MODULE:ATTR, e.g. mypkg.layers:RMSNorm")
    if requested and len(requested) > 1:
        raise UsageError("--framework takes one framework when --impl is given")
    from .executor import ExecutorLost, RemoteError, detect
    from .executor.client import CheckTimeout
    python = pythons.get(requested[0]) if requested else None
    try:
        found = detect(impl_spec, python)
    except RemoteError as exc:
        if requested:  # the checks will report the import failure, each with the point of failure
            return requested[0], None
        raise UsageError(f"--impl {impl_spec!r}: importing it raised {exc.remote_text}") from None
    except (ExecutorLost, CheckTimeout) as exc:
        if requested:
            return requested[0], None
        raise UsageError(f"--impl {impl_spec!r}: importing it ended its process ({exc}), so its framework "
                         f"is unknown; pass --framework") from None
    if requested:
        return requested[0], found["file"]
    if found["framework"] is None:
        raise UsageError(f"--impl {impl_spec!r}: cannot tell which framework it belongs to; "
                         f"pass --framework {'|'.join(adapters.FRAMEWORKS)}")
    return found["framework"], found["file"]


def changed_files(rev: str) -> set[str]:
    """Absolute paths of files changed since ``rev`` (merge base, as a pull request sees it)."""
    import subprocess
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             check=True).stdout.strip()
        names = subprocess.run(["git", "diff", "--name-only", f"{rev}...HEAD"], capture_output=True, text=True,
                               check=True, cwd=top).stdout.split()
        names += subprocess.run(["git", "diff", "--name-only", "HEAD"], capture_output=True, text=True,
                                check=True, cwd=top).stdout.split()
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise UsageError(f"--changed-since {rev}: cannot ask git what changed: {str(detail).strip()}") from None
    return {str((Path(top) / n).resolve()) for n in names}


def _module_file(impl: str) -> str | None:
    try:
        spec = importlib.util.find_spec(impl.split(":", 1)[0])
    except (ImportError, ValueError):
        return None
    return str(Path(spec.origin).resolve()) if spec and spec.origin else None


def plan(contracts: list[str], impl: str | None, bindings: str | None, frameworks: list[str],
         state_map: dict, changed_since: str | None = None, pythons: dict | None = None) -> list[Target]:
    pythons = pythons or {}
    for fw in frameworks:
        if fw not in adapters.FRAMEWORKS:
            raise UsageError(f"--framework {fw!r}: known frameworks are {', '.join(adapters.FRAMEWORKS)}")
    targets: list[Target] = []
    if bindings:
        path = Path(bindings)
        try:
            entries = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--bindings {bindings}: {exc}") from None
        entries = (entries or {}).get("bindings", entries) if isinstance(entries, dict) else entries
        if not isinstance(entries, list):
            raise UsageError(f"--bindings {bindings}: expected a list of {{contract, impl}} entries")
        if changed_since:
            # only the layers a pull request touches: the implementation's file or its contract changed
            changed = changed_files(changed_since)
            entries = [e for e in entries if isinstance(e, dict) and (
                _module_file(str(e.get("impl", ""))) in changed
                or str(find_contract(str(e.get("contract", ""))).resolve()) in changed)]
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or "contract" not in e or "impl" not in e:
                raise UsageError(f"--bindings {bindings}: entry {i} needs 'contract' and 'impl'")
            fw, file = (e["framework"], None) if e.get("framework") else _framework_for(e["impl"], frameworks, pythons)
            targets.append(Target(str(find_contract(e["contract"])), e["impl"], fw, file=file,
                                  state_map={**state_map, **parse_state_map(e.get("state_map", []))}))
        return targets
    if impl:
        if len(contracts) != 1:
            raise UsageError("--impl needs exactly one --contract (use --bindings for several)")
        fw, file = _framework_for(impl, frameworks, pythons)
        return [Target(str(find_contract(contracts[0])), impl, fw, state_map=state_map, file=file)]
    # the embedded default: bundled matrix
    chosen = [find_contract(c) for c in contracts] if contracts else list(bundled_contracts().values())
    for fw in frameworks or list(adapters.FRAMEWORKS):
        if fw not in pythons and not adapters.installed(fw):
            continue
        for path in chosen:
            spec = bundled_impl(fw, Path(path).stem)
            if spec is None:
                try:
                    if load_contract(path).not_applicable(fw):
                        targets.append(Target(str(path), "", fw, bundled=True))
                except ContractError:
                    targets.append(Target(str(path), "", fw, bundled=True))
                continue
            targets.append(Target(str(path), spec, fw, bundled=True, state_map=state_map))
    return targets
