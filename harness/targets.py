"""What a run checks: (contract, implementation, framework, device) targets.

Built from --impl / --bindings, or, with neither, from the bundled matrix: every bundled
contract against the bundled implementation (``reference_impls/<framework>/<contract>.py``,
attribute ``IMPL``) of every installed framework. Nothing here imports a framework unless
the user's own module does.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .changed import CannotAskGit, bindings_entries, contract_names, select_changed
from .frameworks import FRAMEWORKS, installed
from .contract import ContractError, bundled_contracts, find_contract


class UsageError(Exception):
    """A command-line or bindings problem: one clear sentence, no traceback."""


class Inputs:
    """The judge's own inputs (the contracts, the bindings file, the expectations file) as read and hashed before
    any user code runs, detection included. The run uses these bytes; ``changed()`` says which file no longer
    has them (code under test that edited a contract to skip its own checks, say)."""

    def __init__(self):
        self.files: dict = {}   # resolved path -> (what it is, bytes, sha256)

    def add(self, path, what: str):
        p = Path(path).resolve()
        if str(p) in self.files or not p.is_file():
            return   # a missing file is reported where it is used
        try:
            raw = p.read_bytes()
        except OSError:
            return
        self.files[str(p)] = (what, raw, hashlib.sha256(raw).hexdigest())

    def raw(self, path) -> bytes | None:
        entry = self.files.get(str(Path(path).resolve()))
        return entry[1] if entry else None

    def changed(self) -> list[str]:
        """One line per file whose bytes are not those read before any user code ran."""
        out = []
        for path, (what, _, digest) in self.files.items():
            try:
                now = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                now = None
            if now != digest:
                how = "removed" if now is None else f"sha256 {digest[:12]} when read before any user code ran, now {now[:12]}"
                out.append(f"{what} {path} changed during the run ({how}): the run is refused (code under test "
                           f"must not write the run's contracts, bindings or expectations)")
        return out


def read_inputs(contracts: list[str], bindings: str | None, expectations: str | None) -> Inputs:
    """Every file the judge reads to decide, read and hashed now (before detection imports any layer)."""
    out = Inputs()
    if bindings:
        out.add(bindings, "the bindings file")
        entries = bindings_entries(out.raw(bindings) or b"")
        names = [str(e["contract"]) for e in entries or [] if isinstance(e, dict) and "contract" in e]
    else:
        names = list(contracts) or [str(p) for p in bundled_contracts().values()]
    for name in names:
        try:
            out.add(find_contract(name), "the contract")
        except ContractError:
            pass   # an unknown contract: a usage error when planned
    if expectations:
        out.add(expectations, "the expectations file")
    return out


@dataclass
class Target:
    contract_path: str
    impl: str                  # "module:attr"
    framework: str
    bundled: bool = False
    state_map: dict = field(default_factory=dict)
    arg_map: dict = field(default_factory=dict)   # contract constructor argument -> the layer's own name
    file: str | None = None    # where the implementation's module was imported from, when known
    dtypes: tuple | None = None  # a binding's narrowing of the contract's dtypes (None: all it declares)
    signature: dict | None = None  # what its constructor takes (layer_conformance.binding), as the probe read it

    @property
    def impl_label(self) -> str:
        return "reference" if self.bundled else self.impl.rpartition(":")[2]

    def options(self, dtype: str) -> dict:
        """What a record of this target ran with beyond its key, for its reproduction command to repeat: the
        binding's maps and the row's dtype (a command without --dtype runs every dtype's row)."""
        from .contract.loading import SPECS_DIR
        # a user's contract by its path: one of the same name as a bundled one would otherwise rerun the bundled one
        own = {} if Path(self.contract_path).resolve().parent == SPECS_DIR.resolve() else {"contract": self.contract_path}
        return {**own, **{k: v for k, v in (("arg_map", self.arg_map), ("state_map", self.state_map)) if v},
                "dtype": dtype}


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


def parse_state_map(items, option="--state-map", example="gain=weight") -> dict:
    """``SLOT=NAME`` pairs (a list of option values, or a bindings entry's mapping) -> {slot: name}; a state map's
    name may carry a chain of transforms (``w=lin.weight|T``, layer_conformance.state_map), checked here."""
    from .state_map import StateMapError, parse, split_items
    if isinstance(items, dict):  # a bindings entry's mapping form
        out = {str(k): "" if v is None else str(v) for k, v in items.items()}
    else:
        out = {}
        for item in items or []:
            for pair in split_items(item):
                if "=" not in pair:
                    raise UsageError(f"{option} {pair!r}: expected CONTRACT_NAME=LAYER_NAME, e.g. {example}")
                slot, name = pair.split("=", 1)
                out[slot.strip()] = name.strip()
    if option == "--state-map":
        for slot, name in out.items():
            try:
                parse(name)
            except StateMapError as exc:
                raise UsageError(f"{option} {slot}={name}: {exc}") from None
    return out


def parse_arg_map(items) -> dict:
    """``--arg-map d=dim``: the contract's constructor argument ``d`` is the layer's ``dim``; ``--arg-map eps=``
    (in a bindings entry also ``arg_map: {eps: null}``): the layer is built without the contract's ``eps``."""
    return parse_state_map(items, "--arg-map", "d=dim")


def parse_pythons(items, root: str) -> dict:
    """``--executor-python mxnet=.venv-mxnet/bin/python`` -> {framework: python}; relative paths
    are taken from the current directory, else from the rootdir (as an ini value would be)."""
    out = {}
    for item in items or []:
        for pair in str(item).split():
            fw, eq, python = pair.partition("=")
            if not eq or fw not in FRAMEWORKS:
                raise UsageError(f"--executor-python {pair!r}: expected FRAMEWORK=PYTHON with FRAMEWORK one of "
                                 f"{', '.join(FRAMEWORKS)}")
            path = Path(python).expanduser()
            if not path.is_absolute() and not path.exists():
                path = Path(root) / path
            if not path.exists():
                raise UsageError(f"--executor-python {pair!r}: no Python at {path}")
            out[fw] = str(path)
    return out


def bundled_impl(framework: str, contract: str) -> str | None:
    mod = f"layer_conformance.reference_impls.{framework}.{contract}"
    try:
        found = importlib.util.find_spec(mod) is not None
    except ImportError:
        found = False
    return f"{mod}:IMPL" if found else None


def _framework_for(impl_spec: str, requested: list[str], pythons: dict, probe) -> tuple[str, str | None, dict | None]:
    """The framework of ``module:attr``, its module's file and its constructor's signature, asked of
    ``probe``'s executor that imports it (this process never imports the code under test)."""
    if ":" not in impl_spec:
        raise UsageError(f"--impl {impl_spec!r}: expected MODULE:ATTR, e.g. mypkg.layers:RMSNorm")
    if requested and len(requested) > 1:
        raise UsageError("--framework takes one framework when --impl is given")
    from .boundary import ExecutorLost, RemoteError
    from .boundary.client import CheckTimeout
    python = pythons.get(requested[0]) if requested else None
    try:
        found = probe.detect(impl_spec, python, framework=requested[0] if requested else None)
    except RemoteError as exc:
        if requested:  # the checks will report the import failure, each with the point of failure
            return requested[0], None, None
        module = impl_spec.split(":", 1)[0]
        if getattr(exc, "missing_dependency", None):  # the environment (MXNet without its shim), not the module
            raise UsageError(f"--impl {impl_spec!r}: {exc.missing_dependency}") from None
        if exc.type_name == "ModuleNotFoundError":
            raise UsageError(f"--impl {impl_spec!r}: cannot import module {module!r}: {exc}") from None
        if exc.type_name == "AttributeError":
            raise UsageError(f"--impl {impl_spec!r}: module {module!r} has no attribute "
                             f"{impl_spec.split(':', 1)[1]!r}") from None
        raise UsageError(f"--impl {impl_spec!r}: importing it raised {exc.remote_text}") from None
    except (ExecutorLost, CheckTimeout) as exc:
        if requested:
            return requested[0], None, None
        raise UsageError(f"--impl {impl_spec!r}: importing it ended its process ({exc}), so its framework "
                         f"is unknown; pass --framework") from None
    if requested:
        return requested[0], found["file"], found.get("signature")
    if found["framework"] is None:
        raise UsageError(f"--impl {impl_spec!r}: cannot tell which framework it belongs to; "
                         f"pass --framework {'|'.join(FRAMEWORKS)}")
    return found["framework"], found["file"], found.get("signature")


@contextlib.contextmanager
def _probing(zygote_of=None):
    from .boundary.session import Probe
    probe = Probe(zygote_of)
    try:
        yield probe
    finally:
        probe.close()


def _is_layer(contract_path: str) -> bool:
    """Whether a contract builds a layer (read as plain YAML; a malformed one is reported at load)."""
    try:
        data = yaml.safe_load(Path(contract_path).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return True
    return not isinstance(data, dict) or data.get("kind", "layer") != "function"


def binding_problems(targets, contracts: dict) -> list[str]:
    """Why bindings do not fit their layers' constructors (layer_conformance.binding), each said once, before any check
    runs; ``contracts``: resolved contract path -> loaded contract."""
    from . import binding
    out = []
    for t in targets:
        contract = contracts.get(str(Path(t.contract_path).resolve()))
        if t.bundled or contract is None or contract.kind != "layer":
            continue
        why = binding.problem(t.impl, t.signature, contract.constructor, t.arg_map)
        if why and why not in out:
            out.append(why)
    return out


class Targets(list):
    """The planned targets; under --changed-since also ``selection`` (what changed and why each binding
    was or was not selected) and ``untouched`` (bindings not selected: their baseline records are not
    counted as disappeared)."""
    selection: dict | None = None
    untouched: list = []


def plan(contracts: list[str], impl: str | None, bindings: str | None, frameworks: list[str],
         state_map: dict, changed_since: str | None = None, pythons: dict | None = None,
         arg_map: dict | None = None, baseline_loaded: list | None = None, zygote_of=None,
         changed_since_ignore=(), accept_reference_change: bool = False) -> list[Target]:
    """The targets; ``baseline_loaded``: the --baseline's `loaded_files` (None: no baseline), which
    --changed-since selects by too (select_changed), ``changed_since_ignore`` its --changed-since-ignore globs,
    ``accept_reference_change`` its --accept-reference-change (select_changed raises ReferenceChanged without it);
    ``zygote_of``: framework -> the run's zygote, which forks the probe of an implementation whose framework is
    given."""
    arg_map = arg_map or {}
    pythons = pythons or {}
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise UsageError(f"--framework {fw!r}: known frameworks are {', '.join(FRAMEWORKS)}")
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
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or "contract" not in e or "impl" not in e:
                raise UsageError(f"--bindings {bindings}: entry {i} needs 'contract' and 'impl'")
            if "dtypes" in e and (not isinstance(e["dtypes"], list) or not e["dtypes"]
                                  or not all(isinstance(d, str) for d in e["dtypes"])):
                raise UsageError(f"--bindings {bindings}: entry {i}: 'dtypes' must be a non-empty list of dtype "
                                 f"names (the contract's dtypes this layer is meant for)")
        targets = Targets()
        if changed_since:
            # only the layers a pull request touches; see select_changed for what counts
            try:
                entries, targets.selection, untouched = select_changed(entries, bindings, changed_since,
                                                                       baseline_loaded, changed_since_ignore,
                                                                       accept_reference_change)
            except CannotAskGit as exc:
                raise UsageError(str(exc)) from None
            targets.untouched = [(str(e["impl"]), contract_names(str(e["contract"]))) for e in untouched]
        with _probing(zygote_of) as probe:
            for e in entries:
                contract = str(find_contract(e["contract"]))
                if e.get("framework") and not _is_layer(contract):
                    fw, file, signature = e["framework"], None, None  # a function: nothing to ask the probe
                else:
                    fw, file, signature = _framework_for(e["impl"], [e["framework"]] if e.get("framework")
                                                         else frameworks, pythons, probe)
                targets.append(Target(contract, e["impl"], fw, file=file, signature=signature,
                                      state_map={**state_map, **parse_state_map(e.get("state_map", []))},
                                      arg_map={**arg_map, **parse_arg_map(e.get("arg_map", []))},
                                      dtypes=tuple(e["dtypes"]) if "dtypes" in e else None))
        return targets
    if impl:
        if len(contracts) != 1:
            raise UsageError("--impl needs exactly one --contract (use --bindings for several)")
        with _probing(zygote_of) as probe:
            fw, file, signature = _framework_for(impl, frameworks, pythons, probe)
        return [Target(str(find_contract(contracts[0])), impl, fw, state_map=state_map, file=file, arg_map=arg_map,
                       signature=signature)]
    # the embedded default: bundled matrix
    chosen = [find_contract(c) for c in contracts] if contracts else list(bundled_contracts().values())
    for fw in frameworks or list(FRAMEWORKS):
        if fw not in pythons and not installed(fw):
            continue
        for path in chosen:
            spec = bundled_impl(fw, Path(path).stem)
            if spec is None:
                from .reference_check import load_checked
                try:
                    if load_checked(path).not_applicable(fw):
                        targets.append(Target(str(path), "", fw, bundled=True))
                except ContractError:
                    targets.append(Target(str(path), "", fw, bundled=True))
                continue
            targets.append(Target(str(path), spec, fw, bundled=True, state_map=state_map))
    return targets
