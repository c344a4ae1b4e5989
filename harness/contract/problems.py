"""How a contract's problems are said (``ContractError``: every problem at once, each as file:line: field:
message), and the bounds on hostile input that the reader and the rules enforce."""
from __future__ import annotations

# Hostile-input bounds: far above any real contract, far below what would hang the loader.
MAX_NODES = 100_000          # YAML nodes after alias expansion ("billion laughs")
MAX_DEPTH = 64               # nesting of mappings and sequences
MAX_ELEMENTS = 100_000_000   # elements of one state slot
MAX_MESSAGE = 300            # characters of a value quoted back in a message
# Elements of one drawn input: every check draws it several times, in float64 for the reference too.
# Settable per run (--max-input-elements, or this environment variable, which executor processes inherit).
MAX_INPUT_ELEMENTS_ENV = "CONFORMANCE_MAX_INPUT_ELEMENTS"
DEFAULT_MAX_INPUT_ELEMENTS = 16 * 2 ** 20
# The judge draws every case's inputs in float64 to check the reference against itself (and the checks draw
# them again): the elements of all drawn inputs together are bounded per contract (every case's inputs, the
# properties' and the training mode's, summed) and per run (summed over the run's contracts). Their defaults
# follow the per-input limit (twice it per contract, sixteen times per run); each is settable on its own.
# The judge's peak memory while it validates a contract stays within JUDGE_MEMORY_MULTIPLE times the bytes of
# its drawn elements in float64, over the judge's own baseline (tests/hostile/test_bounds.py measures it).
MAX_CONTRACT_ELEMENTS_ENV = "CONFORMANCE_MAX_CONTRACT_ELEMENTS"
MAX_RUN_ELEMENTS_ENV = "CONFORMANCE_MAX_RUN_ELEMENTS"
CONTRACT_ELEMENTS_PER_INPUT = 2
RUN_ELEMENTS_PER_INPUT = 16
JUDGE_MEMORY_MULTIPLE = 12  # measured about 8 (tests/hostile/test_bounds.py): the inputs, their shifted copies, the wire's bytes in flight


class ContractError(Exception):
    """A contract that cannot be used. ``problems`` holds every (line, field, message)."""

    def __init__(self, path, problems):
        self.path = str(path)
        self.problems = sorted(problems, key=lambda p: (p[0] or 0, str(p[1]), str(p[2])))
        lines = [f"{self.path}:{line or '?'}: {fld}: {msg}" for line, fld, msg in self.problems]
        n = len(self.problems)
        super().__init__(f"invalid contract ({n} problem{'s' if n != 1 else ''})\n" + "\n".join(lines))


class ContractNotFound(ContractError):
    """The name or path given does not lead to a file: a usage error, not a broken contract."""

    def __str__(self):
        return "; ".join(f"contract {self.path!r}: {msg}" for _, _, msg in self.problems)


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "..."


def _line_for(lines: dict, at: tuple) -> int | None:
    at = tuple(at)
    while at and at not in lines:
        at = at[:-1]
    return lines.get(at)


def _field_name(at) -> str:
    out = ""
    for part in at:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif not str(part).isprintable() or not str(part).strip() or any(c in str(part) for c in ".[] "):
            out += f"[{str(part)!r}]"  # a key with a line break or a dot must not garble file:line:field
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"

