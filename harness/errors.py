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


def raised_in_adapter(exc: BaseException) -> bool:
    """Whether the harness's own adapter code raised ``exc`` on its own: the deepest frame is in the
    adapters, and no frame of the code under test is on the way there (a layer that calls into adapter
    code to raise "unsupported" from there is still the layer raising)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    adapters = os.path.join(_HARNESS, "adapters")
    if os.path.dirname(os.path.abspath(frames[-1].filename)) != adapters:
        return False
    return not any(_is_user(f.filename) for f in frames)


# names a file to which executors append one line per exception that harness code raised (see
# ``note_harness_error``): the harness's own tests set it while judging correct layers, where any such line is a bug
HARNESS_ERRORS_ENV = "CONFORMANCE_HARNESS_ERRORS"


def raised_by_harness(exc: BaseException) -> str | None:
    """'Type: message (at file:line in function)' where the innermost frame outside installed packages and the
    standard library is the harness's own (it raised, or a framework raised on its call, with no code under test
    below it); None where the code under test is below, and for a method an adapter does not implement (the
    caller leaves out the adapters' other deliberate answer, ``Unsupported``)."""
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


def out_of_memory(text: str) -> bool:
    text = text.lower()
    return text.startswith("memoryerror") or "can't allocate memory" in text or "out of memory" in text \
        or "resource_exhausted" in text or "cannot allocate memory" in text
