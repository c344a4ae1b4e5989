"""Where each process imports from: the judge, the zygotes and the executors (standard library only, imported
by the plugin before numpy or yaml).

* The judge (``python -m pytest`` puts the working directory first on ``sys.path``) refuses a run where a file or
  package of the working directory, or of a ``sys.path`` entry outside the Python installation, has the name of a
  module the judge, a zygote or a framework imports (``SHADOWED``): ``shadows`` finds them by listing those
  directories, importing nothing. Until the refusal, ``guard_early`` keeps those names to the installation.
* The zygotes, the native executors and the bundled references' executor never import from the user's tree:
  their ``sys.path`` is their own interpreter's, nothing of the judge's. The processes that run code under test
  (the layer's, the fresh ones, the probe) and a user reference module's executor get the tree appended after
  the interpreter's own paths (``executor_path``; layerside/server.py applies it).
* ``--untrusted-tree PATH`` (a gate): the working directory is a trusted checkout; the tree under test is PATH,
  mounted into the layer executors only, never on the judge's ``sys.path``.
"""
from __future__ import annotations

import os
import sys

# Top-level names the judge (pytest, its plugins, the harness), a zygote (each framework's import and the modules
# its adapter preloads) or a framework imports. tests/hostile/test_import_paths.py holds the list to what the
# judge and the zygotes import.
SHADOWED = frozenset({
    # the judge and pytest's plugins
    "layer_conformance", "numpy", "yaml", "_yaml", "ml_dtypes", "jinja2", "markupsafe", "jsonschema",
    "jsonschema_specifications", "referencing", "rpds", "attr", "attrs", "execnet", "xdist", "pytest", "_pytest",
    "pluggy", "iniconfig", "packaging", "hypothesis", "_hypothesis_pytestplugin", "sortedcontainers",
    "exceptiongroup", "typing_extensions", "pytest_split", "anyio", "sniffio", "idna", "tomli", "py", "pygments",
    # the frameworks
    "torch", "torchgen", "functorch", "triton", "tensorflow", "tf_keras", "keras", "tensorboard", "jax", "jaxlib",
    "flax", "optax", "orbax", "chex", "mxnet",
    # what their imports and the zygotes' preloads pull in
    "sympy", "mpmath", "networkx", "filelock", "fsspec", "opt_einsum", "optree", "tqdm", "scipy", "absl",
    "astunparse", "certifi", "charset_normalizer", "etils", "flatbuffers", "gast", "google", "h5py",
    "huggingface_hub", "namex", "psutil", "pybind11_abseil", "requests", "rich", "simplejson", "six", "socks",
    "termcolor", "urllib3", "wrapt", "msgpack", "treescope", "pkg_resources", "setuptools", "markdown_it", "mdurl",
    "ml_collections", "protobuf", "grpc", "libtpu", "nvidia", "wheel",
})

_untrusted: str | None = None   # --untrusted-tree, resolved (None: the working directory is the tree under test)


def configure(untrusted_tree: str | None) -> None:
    """(The judge, before any executor starts.) ``untrusted_tree``: --untrusted-tree's directory, or None."""
    global _untrusted
    _untrusted = os.path.realpath(untrusted_tree) if untrusted_tree else None


def untrusted_tree() -> str | None:
    return _untrusted


def _pythonpath() -> list[str]:
    return [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def trusted_tree() -> list[str]:
    """The working directory and PYTHONPATH: where a contract's own reference module is imported from."""
    return [os.getcwd()] + _pythonpath()


def code_tree() -> list[str]:
    """Where the code under test is imported from: --untrusted-tree's directory, else the working directory;
    then PYTHONPATH."""
    return [_untrusted] + _pythonpath() if _untrusted else trusted_tree()


USER_CODE_ROLES = ("layer", "fresh", "probe")


def executor_path(role: str, user_reference: bool = False) -> list[str]:
    """What an executor of ``role`` appends to its own interpreter's sys.path: the code under test's tree for the
    processes that import it, a contract's reference tree for a user reference module's executor, else nothing
    (zygotes, native executors, the bundled references)."""
    if role in USER_CODE_ROLES:
        return code_tree()
    if role == "reference" and user_reference:
        return trusted_tree()
    return []


def installation_roots() -> list[str]:
    """The Python installation: its prefixes and site-packages (resolved)."""
    import site
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:   # an old virtualenv's site module
        pass
    try:
        roots.add(site.getusersitepackages())
    except AttributeError:
        pass
    return sorted({os.path.realpath(r) for r in roots if r})


def _inside(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


_STARTUP = [os.path.realpath(p or os.getcwd()) for p in sys.path if isinstance(p, str)]   # as the plugin loads


def searched_dirs() -> list[str]:
    """The user's directories the judge may import from, outside the Python installation: the working directory,
    PYTHONPATH's entries, and the sys.path entries inside the working directory or added since the plugin was
    imported (pytest's rootdir and `pythonpath`). A directory a .pth file of the installation adds elsewhere is
    the installation's own configuration."""
    roots = installation_roots()
    cwd = os.path.realpath(os.getcwd())
    out = [cwd]
    candidates = _pythonpath() + [p for p in sys.path if isinstance(p, str)]
    for entry in candidates:
        real = os.path.realpath(entry or os.getcwd())
        user = entry in _pythonpath() or _inside(real, [cwd]) or real not in _STARTUP
        if user and real not in out and os.path.isdir(real) and not _inside(real, roots):
            out.append(real)
    return out


def _module_name(directory: str, entry: str) -> str | None:
    """The top-level module name ``entry`` (a name in ``directory``) would be imported as, or None."""
    from importlib.machinery import all_suffixes
    for suffix in sorted(all_suffixes(), key=len, reverse=True):
        if entry.endswith(suffix) and len(entry) > len(suffix):
            return entry[:-len(suffix)]
    full = os.path.join(directory, entry)
    if entry.isidentifier() and any(os.path.isfile(os.path.join(full, "__init__" + s)) for s in all_suffixes()):
        return entry
    return None


def shadows(names=SHADOWED, dirs=None) -> list[str]:
    """Every file or package in ``dirs`` (default ``searched_dirs()``) named like a module of ``names``: a
    directory listing each, nothing imported."""
    found = []
    for directory in searched_dirs() if dirs is None else dirs:
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if stem not in names:
                continue
            if _module_name(directory, entry) in names:
                found.append(os.path.join(directory, entry))
    return found


def refusal(found: list[str]) -> str:
    """The usage error's words for ``found`` (shadows' answer)."""
    return ("layer conformance: refused to run: " + ", ".join(found) + (" has" if len(found) == 1 else " have")
            + " the name of a module the judge, a framework's zygote or a framework imports (a file beside the "
              "run shadows the installed one: `python -m pytest` puts the working directory first on sys.path). "
              "Rename or move it; or, in a gate, run from a trusted checkout with the tree under test given as "
              "--untrusted-tree PATH")


class InstallationOnly:
    """A meta path finder, first on ``sys.meta_path``: the top-level names in ``names`` are imported from sys.path
    without the directories in ``untrusted`` (where a file shadows them), never from those."""

    def __init__(self, names, untrusted):
        self.names = frozenset(names)
        self.untrusted = {os.path.realpath(d) for d in untrusted}

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or "." in fullname or fullname not in self.names:
            return None
        from importlib.machinery import PathFinder
        entries = [p for p in sys.path if isinstance(p, str)
                   and os.path.realpath(p or os.getcwd()) not in self.untrusted]
        return PathFinder.find_spec(fullname, entries)


EARLY: list[str] = []   # what guard_early found: the plugin refuses the run with it (exit 4)


def guard_early() -> list[str]:
    """(The judge, as the plugin is imported, before numpy or yaml.) The shadowing files found; where there are
    any, their names are imported from elsewhere until the plugin refuses the run."""
    found = shadows()
    EARLY[:] = found
    if found and not any(isinstance(f, InstallationOnly) for f in sys.meta_path):
        names = {os.path.basename(f).partition(".")[0] for f in found}
        sys.meta_path.insert(0, InstallationOnly(names, {os.path.dirname(f) for f in found}))
    return found
