"""The mutant catalogue: broken implementations, each with the check that must catch it.

Each framework's module (``<framework>_mutants.py``) lists ``MUTANTS``; tests/test_mutants.py
runs every entry whose framework is installed.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    framework: str
    contract: str
    impl: str          # module:attr
    check: str         # the check id that must fail
    message: str       # a fragment the failure message must contain (names the mistake)

    @property
    def id(self):
        return f"{self.framework}-{self.contract}-{self.impl.rpartition(':')[2]}-{self.check}"


def modules(framework: str) -> list[str]:
    """Every ``tests/mutants/<framework>_*.py`` module (one per area, each with MUTANTS)."""
    from pathlib import Path
    here = Path(__file__).parent
    return [f"tests.mutants.{p.stem}" for p in sorted(here.glob(f"{framework}_*.py"))]
