"""The judge before user code: the names it imports come from the Python installation alone
(``JudgeImportGuard``), the tree under test is set (--untrusted-tree) and never collected, and what the judge may
import later is imported before any layer is (``judge_first``, from ``layer_conformance.plugin.JUDGE_MODULES``)."""
from __future__ import annotations

import os
import sys

import pytest

from .. import import_paths

# top-level names the judge (or pytest's plugins in it, hypothesis's) may import that are not the standard library's
GUARDED = {"ml_dtypes", "jinja2", "markupsafe", "jsonschema", "jsonschema_specifications", "referencing", "rpds",
           "attr", "attrs", "numpy", "yaml", "_yaml", "execnet", "xdist", "pytest", "_pytest", "pluggy", "iniconfig",
           "packaging", "hypothesis", "_hypothesis_pytestplugin", "sortedcontainers", "exceptiongroup",
           "typing_extensions", "layer_conformance"}


def _trusted_roots() -> list[str]:
    import site
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    try:
        roots.add(site.getusersitepackages())
    except AttributeError:   # a virtualenv's site module
        pass
    return sorted({os.path.realpath(r) for r in roots if r})


class JudgeImportGuard:
    """A meta path finder (first on ``sys.meta_path`` of the judge): a module of the standard library or one of
    GUARDED is imported from the Python installation alone (its prefixes and site-packages), never from the current
    directory or any other sys.path entry outside it (``python -m pytest`` puts the current directory first, and
    code under test can write files there). Where the installation has no such module and only a file outside it
    does, the import is refused with an ImportError that names the file."""

    def __init__(self):
        self.roots = _trusted_roots()
        # and the import directories the interpreter was given (.pth files, PYTHONPATH) outside the current
        # directory: the installation's configuration, not a place the code under test writes to
        cwd = os.path.realpath(os.getcwd())
        self.roots = sorted(set(self.roots) | {
            os.path.realpath(p) for p in sys.path
            if p and os.path.isdir(p) and not (os.path.realpath(p) + os.sep).startswith(cwd + os.sep)})

    def trusted(self, path) -> bool:
        real = os.path.realpath(path or os.getcwd())
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery as machinery
        top = fullname.partition(".")[0]
        if path is not None or "." in fullname or not (top in GUARDED or (top in sys.stdlib_module_names
                                                                          and top not in ("test", "tests"))):
            return None   # a submodule is found inside its (already guarded) package
        if machinery.BuiltinImporter.find_spec(fullname) or machinery.FrozenImporter.find_spec(fullname):
            return None
        spec = machinery.PathFinder.find_spec(fullname, [p for p in sys.path if self.trusted(p)])
        if spec is not None:
            return spec
        other = machinery.PathFinder.find_spec(fullname)
        if other is not None:
            where = other.origin if other.has_location else list(other.submodule_search_locations or [])
            raise ImportError(f"layer conformance: refused to import {fullname!r} from {where}: outside the Python "
                              f"installation, where code under test may have written it (the judge imports the "
                              f"standard library and its own dependencies from the installation only)",
                              name=fullname)
        return None


def guard_imports(config=None):
    """The judge imports the names of GUARDED and the standard library from the installation only. With the run's
    ``config`` (before any executor starts): the tree under test is set (--untrusted-tree, else the working
    directory), and outside --untrusted-tree a file beside the run that shadows a module the judge, a zygote or a
    framework imports refuses the run (exit 4, naming it)."""
    if config is not None:
        _import_tree(config)
    if not any(isinstance(f, JudgeImportGuard) for f in sys.meta_path):
        sys.meta_path.insert(0, JudgeImportGuard())


def _import_tree(config):
    path = config.getoption("untrusted_tree", None)
    if not path:
        import_paths.configure(None)
        # what was there as the plugin was imported, and what pytest added to sys.path since (rootdir, pythonpath)
        found = list(dict.fromkeys(import_paths.EARLY + import_paths.shadows()))
        if found:
            raise pytest.UsageError(import_paths.refusal(found))
        return
    tree = _untrusted_tree_of(path)
    import_paths.configure(tree)
    # never on the judge's own import path (a .pth file or PYTHONPATH naming it included)
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p and _is_within(os.path.realpath(p), tree))]


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _untrusted_tree_of(path: str) -> str:
    """--untrusted-tree's directory, resolved; a usage error where it cannot be one."""
    tree = os.path.realpath(path)
    if not os.path.isdir(tree):
        raise pytest.UsageError(f"--untrusted-tree {path}: not a directory")
    if _is_within(os.path.realpath(os.getcwd()), tree):
        raise pytest.UsageError(f"--untrusted-tree {path}: the working directory is inside it; run from a trusted "
                                f"checkout (the base branch) and give the tree under test as a directory of its own")
    return tree


class IgnoreTree:
    """(--untrusted-tree) pytest collects nothing in the tree under test, so it loads no conftest.py there."""

    def __init__(self, tree: str):
        self.tree = tree

    def pytest_ignore_collect(self, collection_path, config):
        return True if _is_within(os.path.realpath(collection_path), self.tree) else None


def refuse_untrusted_arguments(early_config):
    """--untrusted-tree: before pytest loads any conftest.py, a file argument inside the tree under test, or a tree
    named where pytest looks for initial conftests (test* beside an argument), is a usage error; and the tree is
    never collected."""
    path = getattr(early_config.known_args_namespace, "untrusted_tree", None)
    if not path:
        return
    tree = _untrusted_tree_of(path)
    anchors = [os.path.realpath(a.split("::")[0]) for a in early_config.known_args_namespace.file_or_dir or []]
    for a in anchors:
        if _is_within(a, tree):
            raise pytest.UsageError(f"--untrusted-tree {path}: the argument {a} is inside it; the judge collects "
                                    f"nothing from the tree under test")
    for anchor in anchors + [os.path.realpath(str(early_config.invocation_params.dir))]:
        if _is_within(tree, anchor) and tree != anchor and \
                os.path.relpath(tree, anchor).split(os.sep)[0].startswith("test"):
            raise pytest.UsageError(f"--untrusted-tree {path}: pytest loads the conftest.py of a directory named "
                                    f"test* beside its arguments; give the tree under test another name (pr/)")
    early_config.pluginmanager.register(IgnoreTree(tree), "layer-conformance-untrusted-tree")


def judge_first(modules):
    """Before any user code runs: guard the names the judge imports, then import what it may need."""
    import importlib
    guard_imports()
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            pass   # an optional dependency not installed (ml_dtypes without bfloat16): the guard covers its name

