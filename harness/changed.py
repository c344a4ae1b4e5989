"""--changed-since: which bindings a branch's change touches (select_changed), found by reading git's list of
changed files against each binding's import closure (ast, nothing imported), its contract, the bindings file, and,
with a baseline, the files each bound layer loaded in the baseline run. targets.plan asks it."""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import import_paths
from .contract import ContractError, find_contract


class CannotAskGit(Exception):
    """git cannot say what changed (not a repository, an unknown revision): a usage error of the run."""


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
        raise CannotAskGit(f"--changed-since {rev}: cannot ask git what changed: {str(detail).strip()}") from None
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


def bindings_entries(text) -> list | None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    data = (data or {}).get("bindings", data) if isinstance(data, dict) else data
    return data if isinstance(data, list) else None


def contract_names(contract: str) -> set[str]:
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


REFERENCE_IMPL = "the contract's reference implementation"
ACCEPT_REFERENCE_CHANGE = "--accept-reference-change"


class ReferenceChanged(ContractError):
    """A selected binding's contract names a reference implementation that the change itself alters (its module or
    a file of its import closure inside the repository): the layer would be judged against code the same change
    wrote, so the run stops (exit 3, before any check) until a reviewer accepts it with ACCEPT_REFERENCE_CHANGE."""

    def __init__(self, rev: str, changed: list[dict]):
        problems = [(c["line"], "reference.impl",
                     f"the reference implementation {c['reference']} ({c['framework'] or 'its framework'}) changed "
                     f"in this change since {rev} ({', '.join(c['files'])}): a change to both a layer and the "
                     f"reference it is judged against can make a wrong layer pass; a reviewer must approve the "
                     f"reference's change, then the gate runs it with {ACCEPT_REFERENCE_CHANGE} (command line only)")
                    for c in changed]
        super().__init__(changed[0]["path"], problems)
        self.changed = changed

    def __str__(self):
        lines = [f"{c['path']}:{line or '?'}: {fld}: {msg}" for c, (line, fld, msg) in zip(self.changed, self.problems)]
        return (f"contract not trusted in this change ({len(lines)} reference implementation"
                f"{'s' if len(lines) != 1 else ''} changed)\n" + "\n".join(lines))


def _reference(contract) -> dict:
    """The contract's ``reference`` mapping, read as plain YAML (nothing imported); {} where it has none."""
    try:
        ref = (yaml.safe_load(Path(contract).read_text()) or {}).get("reference") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return {}
    return ref if isinstance(ref, dict) else {}


def _reference_line(path: str) -> int | None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    return next((i for i, line in enumerate(lines, 1) if line.startswith("reference:")), None)


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
    names = contract_names(str(entry["contract"]))
    return [r for r in loaded if isinstance(r, dict) and r.get("contract") in names
            and r.get("impl") == str(entry["impl"]) and isinstance(r.get("files"), list)
            and (not entry.get("framework") or r.get("framework") == entry["framework"])]



def _split_ignore(ignore, changes: Changes) -> tuple[list, dict]:
    """The --changed-since-ignore globs applied, and those not applied with why: each is a string (the command
    line's) or (glob, the ini file that sets it), and a glob set in a file the branch changes is not applied (the
    branch's own configuration could leave out the very file it changes)."""
    globs, not_applied = [], {}
    for item in ignore:
        glob, source = (item, None) if isinstance(item, str) else item
        if source and str(Path(source).resolve()) in changes.files:
            not_applied[glob] = f"set in {changes.rel(Path(source).resolve())}, which changed"
        else:
            globs.append(glob)
    return globs, not_applied


class _Selector:
    """One --changed-since selection in progress (select_changed): what changed, the files some entry's reason
    uses, and the changed files a glob kept out of the directory rule."""

    def __init__(self, changes: Changes, bindings: str, loaded: list | None, globs: list, entries: list[dict]):
        self.changes = changes
        self.scan = ImportScan(self.changes.inside)
        self.bindings_path = str(Path(bindings).resolve())
        self.old_entries = None
        if self.bindings_path in self.changes.files:
            self.old_entries = bindings_entries(self.changes.old_text(self.bindings_path) or "")
        self.loaded, self.globs = loaded, globs
        self.used: set = set()
        self.ignored: dict = {}   # changed file -> the glob that kept it out of the directory rule
        self.reference_changed: dict = {}   # contract file -> its reference implementation's changed files
        self.own_rules = {self.bindings_path} | {str(Path(find_contract(str(e["contract"]))).resolve())
                                                 for e in entries}

    def reasons(self, e: dict) -> list[str]:
        """Why entry ``e`` is selected (empty: it is not)."""
        changes = self.changes
        why: list[str] = []
        named: set = set()   # the changed files a reason below names already
        dirs: dict = {}      # a directory the entry imports a module from -> that module's file
        module = str(e["impl"]).split(":", 1)[0]
        contract = find_contract(str(e["contract"]))
        if self.bindings_path in changes.files and (self.old_entries is None or e not in self.old_entries):
            why.append(f"{changes.rel(self.bindings_path)} adds or changes this entry")
            self.used.add(self.bindings_path)
        modules = [module]
        ref = _reference(contract)
        if isinstance(ref.get("module"), str):
            modules.append(ref["module"])
        contract_file = str(Path(contract).resolve())
        if contract_file in changes.files:
            why.append(f"{changes.rel(contract_file)} changed (the contract)")
            self.used.add(contract_file)
            named.add(contract_file)
        for mod in modules:
            why += self._by_imports(mod, module, named, dirs)
        if isinstance(ref.get("impl"), str):
            # trusted code: a change to it and to the layer together could green a wrong layer (select_changed)
            ref_module = ref["impl"].split(":", 1)[0]
            why += self._by_imports(ref_module, module, named, dirs, what=REFERENCE_IMPL)
            closure = self.scan.closure(ref_module)   # the scan's files and imports are cached: no second parse
            files = [changes.rel(f) for f in closure if str(f) in changes.files]
            files += [changes.rel(c) for _, cands in self.scan.missing for c in cands if str(c) in changes.files]
            if files:
                self.reference_changed.setdefault(contract_file, {
                    "contract": str(e["contract"]), "reference": ref["impl"], "framework": ref.get("framework"),
                    "files": []})["files"] += files
        if self.loaded is not None:
            why += self._by_baseline(e, named, dirs)
        dirs.pop(str(changes.top), None)
        return why + self._by_directory(named, dirs)

    def _by_imports(self, mod: str, module: str, named: set, dirs: dict, what: str = "the contract's reference"
                    ) -> list[str]:
        """The reasons from ``mod``'s import closure (``module``: the entry's implementation; else the contract's
        reference, said as ``what``): a changed, unparseable or deleted file in it, or the implementation not
        found."""
        changes, scan, why = self.changes, self.scan, []
        scan.unparseable, scan.missing = [], []
        closure = scan.closure(mod)
        for path in closure:   # the directory's module itself named, rather than its package's __init__
            if dirs.get(str(path.parent), "__init__.py").endswith("__init__.py"):
                dirs[str(path.parent)] = str(path)
        for path, importer in closure.items():
            if str(path) in changes.files:
                role = (f"imported by {importer}" if importer else what if mod != module
                        else "the implementation" if path == module_file(module, scan.roots)
                        else f"a package of {module}")
                if importer and what == REFERENCE_IMPL:
                    role += f", in {what}"
                why.append(f"{changes.rel(path)} changed ({role})")
                self.used.add(str(path))
                named.add(str(path))
        for path in scan.unparseable:
            if str(path) not in changes.files:
                why.append(f"{changes.rel(path)} cannot be parsed")
        for name, cands in scan.missing:
            deleted = [c for c in cands if str(c) in changes.files]
            self.used.update(str(c) for c in deleted)
            named.update(str(c) for c in deleted)
            if deleted:
                why.append(f"{changes.rel(deleted[0])} was deleted")
            elif name == module:
                why.append(f"module {module} is not found (it will fail at import)")
        return why

    def _by_baseline(self, e: dict, named: set, dirs: dict) -> list[str]:
        """The reasons from the baseline's record of what the entry loaded (none: a reason too)."""
        changes, why = self.changes, []
        records = _baseline_records(self.loaded, e)
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
                    self.used.add(f)
                    if f not in named:
                        named.add(f)
                        why.append(f"{changes.rel(f)} changed (read by the layer in the baseline run)")
        return why

    def _by_directory(self, named: set, dirs: dict) -> list[str]:
        """The directory rule: a changed file, not Python source, under a directory the entry imports from."""
        changes, why = self.changes, []
        for f in sorted(changes.files - named - self.own_rules):
            if f.endswith((".py", ".pyi")):
                continue   # a module: the import scan (and the baseline's record) judge it
            under = [d for d in dirs if f.startswith(d + os.sep)]
            if not under:
                continue
            glob = ignored_by(changes.rel(f), self.globs)
            if glob is not None:
                self.ignored.setdefault(f, glob)
                continue
            d = max(under, key=len)
            self.used.add(f)
            why.append(f"{changes.rel(f)} changed (under {changes.rel(d)}/, where {changes.rel(dirs[d])} is imported "
                       f"from)")
        return why

    def unmapped(self) -> dict:
        """Each changed file that selects no entry, with why."""
        changes, out = self.changes, {}
        if self.bindings_path in changes.files and self.bindings_path not in self.used:
            self.used.add(self.bindings_path)
            why_bindings = ("the bindings file: no entry added or changed (a removed entry is compared with "
                            "the baseline: its checks count as no longer run)")
        else:
            why_bindings = None
        for f in sorted(changes.files):
            if f not in self.used and f in self.ignored:
                out[changes.rel(f)] = (f"left out by --changed-since-ignore {self.ignored[f]} (under a directory a "
                                       f"binding imports a module from)")
            elif f not in self.used:
                if self.loaded is None:
                    out[changes.rel(f)] = UNMAPPED_PY if f.endswith(".py") else UNMAPPED
                else:
                    out[changes.rel(f)] = UNMAPPED_PY_LOADED if f.endswith(".py") else UNMAPPED_LOADED
        if why_bindings:
            out[changes.rel(self.bindings_path)] = why_bindings
        return out


def select_changed(entries: list[dict], bindings: str, rev: str, loaded: list | None = None,
                   ignore=(), accept_reference_change: bool = False) -> tuple[list[dict], dict, list]:
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

    A selected binding whose contract's ``reference: {impl}`` module, or a file of its import closure inside the
    repository, the change alters raises ReferenceChanged (a contract error: exit 3, before any check) unless
    ``accept_reference_change`` (--accept-reference-change, given once a reviewer approved it); accepted, the
    selection's ``reference_changed`` lists each such contract with ``accepted: true``.
    Returns (selected entries, selection, untouched entries). Raises CannotAskGit where git cannot say what
    changed."""
    changes = changes_since(rev)
    globs, not_applied = _split_ignore(ignore, changes)
    selector = _Selector(changes, bindings, loaded, globs, entries)
    selected, untouched, why_list = [], [], []
    for e in entries:
        why = selector.reasons(e)
        if why:
            selected.append(e)
            why_list.append({"contract": str(e["contract"]), "impl": str(e["impl"]),
                             "because": list(dict.fromkeys(why))})
        else:
            untouched.append(e)
    unmapped = selector.unmapped()
    reference_changed = [{**c, "files": sorted(set(c["files"])), "path": path, "line": _reference_line(path)}
                         for path, c in selector.reference_changed.items()]
    if reference_changed and not accept_reference_change:
        raise ReferenceChanged(rev, reference_changed)
    selection = {"changed_since": rev, "merge_base": changes.base,
                 "by": BY_IMPORTS if loaded is None else BY_LOADED,   # what selected: the scan, or it and a baseline
                 "changed_files": sorted(changes.rel(f) for f in changes.files),
                 "selected": why_list, "untouched": len(untouched), "unmapped": unmapped,
                 # by name, for the HTML report: no file each imports (or, with a baseline, loaded) changed
                 "untouched_bindings": [{"contract": str(e["contract"]), "impl": str(e["impl"])} for e in untouched]}
    if reference_changed:   # accepted: said in the results file and the gate's lines
        selection["reference_changed"] = [{"contract": c["contract"], "reference": c["reference"],
                                           "files": c["files"], "accepted": True} for c in reference_changed]
    if globs:
        selection["ignore"] = globs
    if not_applied:
        selection["ignore_not_applied"] = not_applied
    return selected, selection, untouched
