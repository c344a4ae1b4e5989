"""How an exception raised by the code under test is told to the user: type, message and the
point in the user's code where it was raised. Used on both sides of the process boundary."""
from __future__ import annotations

import os
import re
import traceback

_HARNESS = os.path.dirname(os.path.abspath(__file__))


def unexpected_error(exc: BaseException) -> str:
    """'TypeError: msg (at file.py:12 in forward)' with the deepest frame outside the harness."""
    text = getattr(exc, "remote_text", None)
    if text is not None:  # raised in an executor: it already says where
        return text
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(_HARNESS)
            and "site-packages" not in f.filename and "/lib/python" not in f.filename]
    point = (user or frames or [None])[-1]
    where = f" (at {point.filename}:{point.lineno} in {point.name})" if point else ""
    message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # terminal colour codes (Keras bolds its messages)
    return f"{type(exc).__name__}: {message}{where}"


# names a file to which executors append one line per exception that harness code raised (see
# ``note_harness_error``): the harness's own tests set it while judging correct layers, where any such line is a bug
HARNESS_ERRORS_ENV = "CONFORMANCE_HARNESS_ERRORS"


def raised_by_harness(exc: BaseException) -> str | None:
    """'Type: message (at file:line in function)' where the innermost frame outside installed packages and the
    standard library is the harness's own (it raised, or a framework raised on its call, with no code under test
    below it); None where the code under test is below, and for a method an adapter does not implement (the
    caller leaves out the adapters' other deliberate answer, ``NotApplicable``)."""
    if isinstance(exc, NotImplementedError):
        return None
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename).startswith(_HARNESS) or _is_user(f.filename)]
    if not frames or _is_user(frames[-1].filename):
        return None
    f = frames[-1]
    return f"{type(exc).__name__}: {exc} (at {f.filename}:{f.lineno} in {f.name})"


def note_harness_error(exc: BaseException) -> None:
    """Appends ``raised_by_harness``'s line for ``exc`` to the file ``HARNESS_ERRORS_ENV`` names, if it is set."""
    path = os.environ.get(HARNESS_ERRORS_ENV)
    said = raised_by_harness(exc) if path else None
    if said:
        with open(path, "a") as f:  # one short append per line: executors of one run share the file
            f.write(said.replace("\n", " ") + "\n")


def _is_user(filename: str) -> bool:
    path = os.path.abspath(filename)
    return not (path.startswith(_HARNESS) or "site-packages" in path or "/lib/python" in path
                or filename.startswith("<"))


class EnvironmentProblem(Exception):
    """A package the run needs is missing or broken in this environment (``missing_dependency``'s text):
    the user's to fix, never a layer failure."""


def missing_dependency(exc: BaseException) -> str | None:
    """For an exception that says an installed package's own code could not import a third-party package
    (not installed, or installed in a version that does not import in this environment): the usage error
    that names the package and what to do. None for anything else, the layer's own imports included (their
    ImportError is raised at the user's line). In the judge, an executor's exception carries the text."""
    if hasattr(exc, "missing_dependency"):  # described in the executor, where the traceback was
        return exc.missing_dependency
    chain, seen = [], exc
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    frames = traceback.extract_tb(exc.__traceback__)
    shim = _mxnet_without_shim(chain, frames)
    if shim is not None:
        return shim
    if not any(isinstance(e, ImportError) for e in chain):
        return None
    if not frames or _is_user(frames[-1].filename):
        return None
    # the import machinery's own frames (importlib, <frozen importlib._bootstrap>) name no package: where the
    # innermost frame beyond them is the harness's, the harness imported a module that is not there (the user's
    # --impl module), which is no installed package's missing dependency
    own = [f for f in frames if not (f.filename.startswith("<") or _stdlib(f.filename))]
    if own and os.path.abspath(own[-1].filename).startswith(_HARNESS):
        return None
    absent = next((e.name for e in chain if isinstance(e, ModuleNotFoundError) and e.name), None)
    needed_by = _installed_package(frames[-1].filename)
    if absent is not None:
        package = absent.split(".")[0]
        return f"the package {package!r} is not installed, and {needed_by} needs it here: pip install {package}"
    cause = next(e for e in reversed(chain) if isinstance(e, ImportError))
    return (f"the installed package {needed_by!r} cannot be imported in this environment ({type(cause).__name__}: "
            f"{cause}): `pip check` names the requirement it breaks; install a version of {needed_by!r} that "
            f"fits the other packages")


# the numpy aliases MXNet 1.9.1 uses and numpy 1.24 removed (layer_conformance.layerside.mxnet_shim.ALIASES)
_NUMPY_ALIAS = re.compile(r"module 'numpy' has no attribute '(bool|int|float|complex|object|str)'")
MXNET_SHIM = "from layer_conformance.layerside.mxnet_shim import apply; apply()"


def _mxnet_without_shim(chain, frames) -> str | None:
    """MXNet 1.9.1 imported on numpy >= 1.24 without the shim: ``import mxnet`` raises AttributeError for a
    removed numpy alias (numpy.bool) from MXNet's own modules. The README's fix, by name; None for anything else."""
    said = next((m for e in chain if isinstance(e, AttributeError) for m in [_NUMPY_ALIAS.search(str(e))] if m),
                None)
    if said is None or not any(f"{os.sep}mxnet{os.sep}" in f.filename for f in frames):
        return None
    return (f"importing mxnet raised AttributeError: {said.group(0)}: MXNet 1.9.1 imports on numpy >= 1.24 only "
            f"after the shim that puts back numpy's removed aliases; call `{MXNET_SHIM}` before the first "
            f"`import mxnet` (at the top of your layer's module, above its own import of mxnet)")


def _stdlib(filename: str) -> bool:
    path = os.path.abspath(filename)
    return "/lib/python" in path and "site-packages" not in path and "dist-packages" not in path


def _installed_package(filename: str) -> str:
    """The top-level package an installed file belongs to (site-packages/pkg/_src/x.py: 'pkg')."""
    path = os.path.abspath(filename)
    if path.startswith(_HARNESS + os.sep):
        return "layer-conformance"
    parts = path.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts[:-1]:
            return os.path.splitext(parts[parts.index(marker) + 1])[0]
    return os.path.basename(path)


def out_of_memory(text: str) -> bool:
    text = text.lower()
    return text.startswith("memoryerror") or "can't allocate memory" in text or "out of memory" in text \
        or "resource_exhausted" in text or "cannot allocate memory" in text
