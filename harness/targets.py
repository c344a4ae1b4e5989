"""What a run checks: (contract, implementation, framework, device) targets.

Built from --impl / --bindings, or, with neither, from the bundled matrix: every bundled
contract against the bundled implementation (``reference_impls/<framework>/<contract>.py``,
attribute ``IMPL``) of every installed framework. Nothing here imports a framework unless
the user's own module does.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import import_paths
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
        entries = _entries_of(out.raw(bindings) or b"")
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
        return {**{k: v for k, v in (("arg_map", self.arg_map), ("state_map", self.state_map)) if v}, "dtype": dtype}


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
    if isinstance(items, dict):  # a bindings entry's mapping form
        return {str(k): "" if v is None else str(v) for k, v in items.items()}
    out = {}
    for item in items or []:
        for pair in str(item).replace(",", " ").split():
            if "=" not in pair:
                raise UsageError(f"{option} {pair!r}: expected CONTRACT_NAME=LAYER_NAME, e.g. {example}")
            slot, name = pair.split("=", 1)
            out[slot.strip()] = name.strip()
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


def _git(args, cwd=None) -> str:
    import subprocess
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=cwd).stdout


@dataclass
class Changes:
    """What changed since ``rev``: against the merge base (as a pull request sees it), plus uncommitted
    and untracked (not ignored) files."""
    rev: str
    top: Path
    base: str
    files: set            # absolute resolved paths, deleted files included
    tracked: set          # absolute resolved paths of every file git tracks

    def rel(self, path) -> str:
        try:
            return Path(path).relative_to(self.top).as_posix()
        except ValueError:
            return str(path)

    def inside(self, path) -> bool:
        """A file of this repository: tracked, or one of the changes (not an ignored virtualenv's)."""
        return str(path) in self.tracked or str(path) in self.files

    def old_text(self, path) -> str | None:
        """The file's text at the merge base, or None where it did not exist."""
        import subprocess
        try:
            return _git(["show", f"{self.base}:{self.rel(Path(path).resolve())}"], cwd=self.top)
        except subprocess.CalledProcessError:
            return None


def changes_since(rev: str) -> Changes:
    import subprocess
    try:
        # under --untrusted-tree the change is the tree under test's (the working directory is the base branch)
        top = Path(_git(["rev-parse", "--show-toplevel"], cwd=import_paths.untrusted_tree()).strip()).resolve()
        base = _git(["merge-base", rev, "HEAD"], cwd=top).strip()
        names = _git(["diff", "--name-only", "-z", base, "HEAD"], cwd=top).split("\0")
        names += _git(["diff", "--name-only", "-z", "HEAD"], cwd=top).split("\0")
        names += _git(["ls-files", "-z", "--others", "--exclude-standard"], cwd=top).split("\0")
        tracked = _git(["ls-files", "-z"], cwd=top).split("\0")
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise UsageError(f"--changed-since {rev}: cannot ask git what changed: {str(detail).strip()}") from None
    absolute = lambda ns: {str(top / n) for n in ns if n}
    return Changes(rev, top, base, absolute(names), absolute(tracked))


def changed_files(rev: str) -> set[str]:
    """Absolute paths of files changed since ``rev`` (merge base, as a pull request sees it)."""
    return changes_since(rev).files


def _search_roots() -> list[Path]:
    """Where ``import`` looks, in its order: the current directory (as --impl imports; --untrusted-tree's directory
    instead, where given), PYTHONPATH, sys.path."""
    out: list[Path] = []
    for entry in [*import_paths.code_tree(), *sys.path]:
        p = Path(entry or os.getcwd())
        if p.is_dir():
            p = p.resolve()
            if p not in out:
                out.append(p)
    return out


def module_candidates(name: str, roots=None) -> list[Path]:
    """Every file that could hold module ``name`` (pkg/mod.py or pkg/mod/__init__.py under each root)."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    return [f for root in (roots if roots is not None else _search_roots())
            for f in (root.joinpath(*parts[:-1], parts[-1] + ".py"), root.joinpath(*parts, "__init__.py"))]


def module_file(name: str, roots=None) -> Path | None:
    """The file ``import name`` would load, found on the filesystem alone: nothing is imported, so no
    package's ``__init__`` (user code) runs in this process."""
    return next((f for f in module_candidates(name, roots) if f.is_file()), None)


def _imported_names(tree, module: str, is_package: bool) -> set[str]:
    """Every module a parsed file may import: import statements anywhere in it (functions included), and
    importlib.import_module / __import__ with a literal name. ``from a import b`` may import a.b."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                mod = ".".join(filter(None, [base, node.module]))
            else:
                mod = node.module or ""
            if mod:
                names.add(mod)
            names.update(f"{mod}.{a.name}" if mod else a.name for a in node.names if a.name != "*")
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            names.add(node.args[0].value)
    return names


class ImportScan:
    """The files a module pulls in when imported, found by reading import statements (ast), never by
    importing. Only files for which ``inside(path)`` holds are followed (the repository's own code, not
    the frameworks). Files that cannot be parsed are collected in ``unparseable``; modules imported but
    found nowhere, with the files they could have been, in ``missing``."""

    def __init__(self, inside, roots=None):
        self.inside = inside
        self.roots = roots if roots is not None else _search_roots()
        self._files: dict = {}
        self._imports: dict = {}
        self.unparseable: list[Path] = []
        self.missing: list[tuple[str, list[Path]]] = []

    def _file(self, name):
        if name not in self._files:
            self._files[name] = module_file(name, self.roots)
        return self._files[name]

    def _names(self, path: Path, name: str):
        if path not in self._imports:
            try:
                tree = ast.parse(path.read_bytes(), filename=str(path))
            except (SyntaxError, ValueError, OSError):
                self._imports[path] = None
            else:
                self._imports[path] = _imported_names(tree, name, path.name == "__init__.py")
        return self._imports[path]

    def closure(self, module: str) -> dict:
        """file -> the module that imports it (None for ``module`` itself and its packages), in the order
        found. Importing a.b.c runs a/__init__.py and a/b/__init__.py first, so those count too."""
        out: dict = {}
        seen: set = set()
        queue = [(module, None)]
        while queue:
            name, importer = queue.pop(0)
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub in seen:
                    continue
                seen.add(sub)
                path = self._file(sub)
                if path is None:
                    # a deleted module of the repository, a name imported from a module, or not a file at all
                    cands = [c for c in module_candidates(sub, self.roots) if self.inside(c)]
                    if cands or sub == module:
                        self.missing.append((sub, cands))
                    continue
                if not self.inside(path):
                    continue
                out.setdefault(path, importer)
                names = self._names(path, sub)
                if names is None:
                    if path not in self.unparseable:
                        self.unparseable.append(path)
                    continue
                queue.extend((n, sub) for n in sorted(names))
        return out


def _entries_of(text) -> list | None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    data = (data or {}).get("bindings", data) if isinstance(data, dict) else data
    return data if isinstance(data, list) else None


def _contract_names(contract: str) -> set[str]:
    """The names a binding's records carry for its contract (read as plain YAML: nothing imported)."""
    path = find_contract(contract)
    names = {Path(path).stem}
    try:
        name = (yaml.safe_load(Path(path).read_text()) or {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        name = None
    if isinstance(name, str):
        names.add(name)
    return names


UNMAPPED_PY = "a Python file that no bound implementation (or its contract's reference) imports"
UNMAPPED = ("not an implementation, a contract, a module they import, a file under a directory they import a "
            "module from (the top level aside), or the bindings file")
# with a baseline's `loaded_files` (what each bound layer loaded in the baseline run)
UNMAPPED_PY_LOADED = UNMAPPED_PY + ", nor any bound layer loaded in the baseline run"
UNMAPPED_LOADED = UNMAPPED.replace(", or the bindings file", ", the bindings file, or a file a bound layer read "
                                                             "in the baseline run")
BY_IMPORTS = "imports (static)"
BY_LOADED = "imports (static) + files loaded in the baseline run"


def ignored_by(rel: str, globs) -> str | None:
    """The first --changed-since-ignore glob that ``rel`` (a path relative to the top level) or a directory above
    it matches (fnmatch: ``*`` crosses ``/`` too; ``weights`` and ``weights/`` leave out all under weights/)."""
    import fnmatch
    parts = rel.split("/")
    heads = ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]
    for glob in globs:
        pattern = glob.rstrip("/") or glob
        if any(fnmatch.fnmatchcase(h, pattern) for h in heads):
            return glob
    return None


def _baseline_records(loaded: list, entry: dict) -> list[dict]:
    """The baseline's `loaded_files` records of a bindings entry (its contract, implementation and, where the
    entry names one, framework)."""
    names = _contract_names(str(entry["contract"]))
    return [r for r in loaded if isinstance(r, dict) and r.get("contract") in names
            and r.get("impl") == str(entry["impl"]) and isinstance(r.get("files"), list)
            and (not entry.get("framework") or r.get("framework") == entry["framework"])]


def select_changed(entries: list[dict], bindings: str, rev: str, loaded: list | None = None,
                   ignore=()) -> tuple[list[dict], dict, list]:
    """The bindings a change touches, why, and a ``selection`` record for the results file.

    An entry is selected when its implementation's file, a module it imports (statically, transitively,
    inside the repository), its contract (or the contract's reference module) changed, or the bindings
    file added or changed the entry. A file in that import closure that cannot be parsed, or an
    implementation that cannot be found (deleted), selects the entry: it then fails at import instead of
    being dropped silently.

    ``loaded``: the baseline's `loaded_files` (--baseline), what each binding's processes saw its code load
    in the baseline run (layerside.server.FileRecorder: dynamic imports, data files, symbolic links' targets,
    which no static scan sees). An entry is also selected when a file its record names changed, or when the
    baseline has no record of it (not run there, failed to import, or a baseline written without records).

    The directory rule: a changed file that is not Python source, under a directory the entry imports a module
    from (its import closure's, and with a baseline its recorded modules' directories; not the repository's top
    level, where its README and configuration lie), selects the entry: data read by native code (an mmap from
    C, which no audit hook sees) selects it even without a baseline. ``ignore``: --changed-since-ignore globs,
    each a string (the command line's) or (glob, the ini file that sets it: not applied where the branch changes
    that file); a file one matches selects nothing by this rule (it still does as an import or a file the
    baseline saw read).
    Returns (selected entries, selection, untouched entries)."""
    changes = changes_since(rev)
    scan = ImportScan(changes.inside)
    bindings_path = str(Path(bindings).resolve())
    old_entries = None
    if bindings_path in changes.files:
        old_entries = _entries_of(changes.old_text(bindings_path) or "")
    used: set = set()
    globs, not_applied = [], {}
    for item in ignore:
        glob, source = (item, None) if isinstance(item, str) else item
        if source and str(Path(source).resolve()) in changes.files:
            # the branch's own configuration could leave out the very file it changes
            not_applied[glob] = f"set in {changes.rel(Path(source).resolve())}, which changed"
        else:
            globs.append(glob)
    ignored: dict = {}   # changed file -> the glob that kept it out of the directory rule
    own_rules = {bindings_path} | {str(Path(find_contract(str(e["contract"]))).resolve()) for e in entries}
    selected, untouched, why_list = [], [], []
    for e in entries:
        why: list[str] = []
        named: set = set()   # the changed files a reason below names already
        dirs: dict = {}      # a directory the entry imports a module from -> that module's file
        module = str(e["impl"]).split(":", 1)[0]
        contract = find_contract(str(e["contract"]))
        if bindings_path in changes.files and (old_entries is None or e not in old_entries):
            why.append(f"{changes.rel(bindings_path)} adds or changes this entry")
            used.add(bindings_path)
        modules = [module]
        try:
            ref = (yaml.safe_load(Path(contract).read_text()) or {}).get("reference") or {}
            if isinstance(ref, dict) and isinstance(ref.get("module"), str):
                modules.append(ref["module"])
        except (OSError, yaml.YAMLError, AttributeError):
            pass
        contract_file = str(Path(contract).resolve())
        if contract_file in changes.files:
            why.append(f"{changes.rel(contract_file)} changed (the contract)")
            used.add(contract_file)
            named.add(contract_file)
        for mod in modules:
            scan.unparseable, scan.missing = [], []
            closure = scan.closure(mod)
            for path in closure:   # the directory's module itself named, rather than its package's __init__
                if dirs.get(str(path.parent), "__init__.py").endswith("__init__.py"):
                    dirs[str(path.parent)] = str(path)
            for path, importer in closure.items():
                if str(path) in changes.files:
                    what = (f"imported by {importer}" if importer else "the contract's reference" if mod != module
                            else "the implementation" if path == module_file(module, scan.roots)
                            else f"a package of {module}")
                    why.append(f"{changes.rel(path)} changed ({what})")
                    used.add(str(path))
                    named.add(str(path))
            for path in scan.unparseable:
                if str(path) not in changes.files:
                    why.append(f"{changes.rel(path)} cannot be parsed")
            for name, cands in scan.missing:
                deleted = [c for c in cands if str(c) in changes.files]
                used.update(str(c) for c in deleted)
                named.update(str(c) for c in deleted)
                if deleted:
                    why.append(f"{changes.rel(deleted[0])} was deleted")
                elif name == module:
                    why.append(f"module {module} is not found (it will fail at import)")
        if loaded is not None:
            records = _baseline_records(loaded, e)
            if not records:
                why.append("the baseline has no record of what it loaded")
            for r in records:
                if r.get("truncated"):
                    why.append("the baseline's record of what it loaded is incomplete (cut at its cap)")
                for rel in r["files"]:
                    # recorded relative to the top level (another checkout's paths match too)
                    f = str(changes.top / rel) if isinstance(rel, str) and not os.path.isabs(rel) else str(rel)
                    if f.endswith(".py") and changes.inside(f):
                        dirs.setdefault(str(Path(f).parent), f)   # a module it was seen to import
                    if f in changes.files:
                        used.add(f)
                        if f not in named:
                            named.add(f)
                            why.append(f"{changes.rel(f)} changed (read by the layer in the baseline run)")
        dirs.pop(str(changes.top), None)
        for f in sorted(changes.files - named - own_rules):
            if f.endswith((".py", ".pyi")):
                continue   # a module: the import scan (and the baseline's record) judge it
            under = [d for d in dirs if f.startswith(d + os.sep)]
            if not under:
                continue
            glob = ignored_by(changes.rel(f), globs)
            if glob is not None:
                ignored.setdefault(f, glob)
                continue
            d = max(under, key=len)
            used.add(f)
            why.append(f"{changes.rel(f)} changed (under {changes.rel(d)}/, where {changes.rel(dirs[d])} is imported "
                       f"from)")
        if why:
            selected.append(e)
            why_list.append({"contract": str(e["contract"]), "impl": str(e["impl"]),
                             "because": list(dict.fromkeys(why))})
        else:
            untouched.append(e)
    if bindings_path in changes.files and bindings_path not in used:
        used.add(bindings_path)
        why_bindings = ("the bindings file: no entry added or changed (a removed entry is compared with "
                        "the baseline: its checks count as no longer run)")
    else:
        why_bindings = None
    unmapped = {}
    for f in sorted(changes.files):
        if f not in used and f in ignored:
            unmapped[changes.rel(f)] = (f"left out by --changed-since-ignore {ignored[f]} (under a directory a "
                                        f"binding imports a module from)")
        elif f not in used:
            if loaded is None:
                unmapped[changes.rel(f)] = UNMAPPED_PY if f.endswith(".py") else UNMAPPED
            else:
                unmapped[changes.rel(f)] = UNMAPPED_PY_LOADED if f.endswith(".py") else UNMAPPED_LOADED
    if why_bindings:
        unmapped[changes.rel(bindings_path)] = why_bindings
    selection = {"changed_since": rev, "merge_base": changes.base,
                 "by": BY_IMPORTS if loaded is None else BY_LOADED,   # what selected: the scan, or it and a baseline
                 "changed_files": sorted(changes.rel(f) for f in changes.files),
                 "selected": why_list, "untouched": len(untouched), "unmapped": unmapped,
                 # by name, for the HTML report: no file each imports (or, with a baseline, loaded) changed
                 "untouched_bindings": [{"contract": str(e["contract"]), "impl": str(e["impl"])} for e in untouched]}
    if globs:
        selection["ignore"] = globs
    if not_applied:
        selection["ignore_not_applied"] = not_applied
    return selected, selection, untouched


class Targets(list):
    """The planned targets; under --changed-since also ``selection`` (what changed and why each binding
    was or was not selected) and ``untouched`` (bindings not selected: their baseline records are not
    counted as disappeared)."""
    selection: dict | None = None
    untouched: list = []


def plan(contracts: list[str], impl: str | None, bindings: str | None, frameworks: list[str],
         state_map: dict, changed_since: str | None = None, pythons: dict | None = None,
         arg_map: dict | None = None, baseline_loaded: list | None = None, zygote_of=None,
         changed_since_ignore=()) -> list[Target]:
    """The targets; ``baseline_loaded``: the --baseline's `loaded_files` (None: no baseline), which
    --changed-since selects by too (select_changed), ``changed_since_ignore`` its --changed-since-ignore globs;
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
            entries, targets.selection, untouched = select_changed(entries, bindings, changed_since,
                                                                   baseline_loaded, changed_since_ignore)
            targets.untouched = [(str(e["impl"]), _contract_names(str(e["contract"]))) for e in untouched]
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
