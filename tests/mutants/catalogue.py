"""The mutant catalogue: broken implementations, each with the complete set of checks it must fail.

Each framework's module (``<framework>_mutants.py``, ``<framework>_contracts.py``) lists ``MUTANTS``;
tests/test_mutants.py runs every check on every entry whose framework is installed and asserts that
exactly ``fails`` fail, exactly ``blocked`` are reported blocked (by one of ``fails``), and that the
message of ``check`` contains ``message``.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    framework: str
    contract: str
    impl: str          # module:attr
    check: str         # the check that names the mistake
    message: str       # a fragment its failure message must contain (names the mistake)
    also: tuple = ()   # other checks the mistake really breaks: they must fail too (independent axes)
    blocked: tuple = ()  # checks that cannot judge the layer because of it: reported blocked, not failed
    dtype: str | None = None  # run in this dtype of the contract's ``dtypes`` (its per-dtype checks only)

    @property
    def fails(self) -> frozenset:
        """Every check that must fail; every other check must pass, skip or be blocked (``blocked``)."""
        return frozenset((self.check,) + tuple(self.also))

    @property
    def target(self) -> tuple:
        return (self.framework, self.contract, self.impl) + ((self.dtype,) if self.dtype else ())

    @property
    def id(self):
        return f"{self.framework}-{self.contract}-{self.impl.rpartition(':')[2]}-{self.check}" \
            + (f"-{self.dtype}" if self.dtype else "")


def modules(framework: str) -> list[str]:
    """Every ``tests/mutants/<framework>_*.py`` module (one per area, each with MUTANTS)."""
    from pathlib import Path
    here = Path(__file__).parent
    return [f"tests.mutants.{p.stem}" for p in sorted(here.glob(f"{framework}_*.py"))]
