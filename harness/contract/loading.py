"""Loading a contract: bytes -> YAML with lines -> the schema and the rules -> a Contract, or ContractError with
every problem; the bundled contracts and finding one by name or path."""
from __future__ import annotations

import hashlib
import importlib.resources
import os
from pathlib import Path
from typing import Callable

import yaml

from .model import Contract
from .problems import (CONTRACT_ELEMENTS_PER_INPUT, DEFAULT_MAX_INPUT_ELEMENTS, MAX_CONTRACT_ELEMENTS_ENV,
                       MAX_INPUT_ELEMENTS_ENV, MAX_RUN_ELEMENTS_ENV, RUN_ELEMENTS_PER_INPUT, ContractError,
                       ContractNotFound, _short)
from .reading import _is_int
from .rules import _semantic_problems
from .schema import _schema_problems, _validator
from .yaml_lines import _Structure, _load_with_lines


def _specs_dir() -> Path:
    """Where the bundled contracts are.

    An installed wheel carries them as package data (``harness/specs``, mapped from the repository's
    top-level ``specs/`` at build time). A source checkout, installed editable or put on ``sys.path``,
    reads its own ``specs/`` beside the package, so that a checkout never reads another tree's contracts.
    """
    packaged = importlib.resources.files("layer_conformance") / "specs"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "specs"


SPECS_DIR = _specs_dir()


# --- loading -----------------------------------------------------------------

def input_element_limit(value=None) -> int:
    """The per-input element limit: ``value`` if given, else the environment's, else the default."""
    if value is None:
        raw = os.environ.get(MAX_INPUT_ELEMENTS_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_INPUT_ELEMENTS
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{MAX_INPUT_ELEMENTS_ENV}={raw!r}: expected a positive whole number of elements") from None
    if not _is_int(value) or value < 1:
        raise ValueError(f"max input elements {value!r}: expected a positive whole number of elements")
    return value


def _element_limit(value, env: str, default: int, what: str) -> int:
    if value is None:
        raw = os.environ.get(env, "").strip()
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{env}={raw!r}: expected a positive whole number of elements") from None
    if not _is_int(value) or value < 1:
        raise ValueError(f"max {what} elements {value!r}: expected a positive whole number of elements")
    return value


class ElementBudget:
    """The bounds on drawn elements beyond each input's: per contract (every drawn input of it, summed) and per
    run (every contract's sum, summed; ``used`` so far). A contract over either is a contract error, said before
    anything of it is drawn. ``None`` limits: the environment's, else the defaults that follow the per-input
    limit (CONTRACT_ELEMENTS_PER_INPUT, RUN_ELEMENTS_PER_INPUT times it)."""

    def __init__(self, contract_limit=None, run_limit=None, max_input_elements=None):
        per_input = input_element_limit(max_input_elements)
        self.contract_limit = _element_limit(contract_limit, MAX_CONTRACT_ELEMENTS_ENV,
                                             CONTRACT_ELEMENTS_PER_INPUT * per_input, "contract")
        self.run_limit = _element_limit(run_limit, MAX_RUN_ELEMENTS_ENV, RUN_ELEMENTS_PER_INPUT * per_input, "run")
        self.used = 0
        self.pending = 0          # the elements of the contract being loaded
        self.counted: dict = {}   # resolved path -> its elements (a contract loaded again is not counted twice)

    def problem(self, elements: int) -> str | None:
        if elements > self.contract_limit:
            return (f"the contract's drawn inputs (every case's, the properties' and the training mode's) total "
                    f"{elements} elements, more than the {self.contract_limit} allowed per contract "
                    f"(--max-contract-elements or {MAX_CONTRACT_ELEMENTS_ENV} raises it)")
        if self.used + elements > self.run_limit:
            return (f"the contract's drawn inputs total {elements} elements, and with the run's other contracts' "
                    f"{self.used} that is more than the {self.run_limit} allowed per run "
                    f"(--max-run-elements or {MAX_RUN_ELEMENTS_ENV} raises it)")
        return None


ReferenceNames = Callable[[str, "float | None"], "tuple[list[str], str | None]"]


def load_contract(path, max_input_elements: int | None = None, budget: ElementBudget | None = None,
                  raw: bytes | None = None, reference_names: ReferenceNames | None = None) -> Contract:
    """Read, validate and return the contract at ``path``; raise ContractError listing every problem.

    ``max_input_elements`` caps the elements of each drawn input (default: ``input_element_limit()``);
    ``budget`` the elements of all of them (default: the per-contract limit alone; a run passes its own, which
    counts the run's contracts). ``raw``: the file's bytes as read before (the judge reads every contract
    before any user code runs, and uses what it read then).

    Loading runs no code: the reference module is neither imported nor called here. ``reference_names(module,
    timeout)`` -> (names, why not importable) lets the rules that ask what the reference defines (its forward,
    vjp, init_<slot>, second_order's function) be said with the others; without it they are not looked at. A
    run loads its contracts with ``reference_check.load_checked``, which passes the reference executor's and
    then checks the reference against itself.
    """
    limit = input_element_limit(max_input_elements)
    if budget is None:
        budget = ElementBudget(max_input_elements=limit, run_limit=2 ** 62)
    path = Path(path)
    if raw is None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ContractError(path, [(None, "(file)", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ContractError(path, [(line, "(file)", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    try:
        data, lines, problems, replaced = _load_with_lines(text)
    except _Structure as exc:
        raise ContractError(path, exc.problems) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else (text[:getattr(exc, "position", 0)].count("\n") + 1
                                           if isinstance(getattr(exc, "position", None), int) else None)
        msg = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        context = getattr(exc, "context", None)
        raise ContractError(path, [(line, "(yaml)", _short(f"malformed YAML: {msg}"
                                                          + (f" ({context})" if context else "")))]) from None
    except RecursionError:
        raise ContractError(path, [(None, "(yaml)", "nested too deeply to read")]) from None
    if data is None:
        raise ContractError(path, [(1, "(file)", "the contract is empty (a mapping with name, kind, "
                                    "reference and cases is expected)")])
    if not isinstance(data, dict):
        raise ContractError(path, [(1, "(top level)", f"a contract must be a mapping, not a {type(data).__name__}")])

    found = [p for err in _validator().iter_errors(data) for p in _schema_problems(err, lines)]
    key = str(path.resolve())
    if key in budget.counted:   # loaded again (a second collection of the file): counted once
        budget.used -= budget.counted.pop(key)
    found += _semantic_problems(data, lines, limit, budget, reference_names)
    # a value the reader replaced has been reported already; what follows from the stand-in is noise
    problems += [p for p in found if not any(p[1] == f or p[1].startswith((f + ".", f + "[")) for f in replaced)]
    problems = list(dict.fromkeys(problems))
    if problems:
        raise ContractError(path, problems)
    contract = Contract(data=data, path=str(path), lines=lines, digest=hashlib.sha256(raw).hexdigest())
    budget.counted[key] = contract.drawn_elements = budget.pending
    budget.used += budget.counted[key]
    return contract


def bundled_contracts() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS_DIR.glob("*.yaml"))}


def find_contract(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.exists():
        return p
    if p.suffix in (".yaml", ".yml") or "/" in str(name_or_path) or "\\" in str(name_or_path):
        raise ContractNotFound(name_or_path, [(None, "(file)", (
            f"no such contract file ({p.resolve()} does not exist; a relative path is read from the current "
            f"directory); or give a bundled contract's name: {', '.join(bundled_contracts()) or 'none installed'}"))])
    bundled = bundled_contracts()
    if name_or_path in bundled:
        return bundled[name_or_path]
    if bundled:
        known = f"the bundled contracts are {', '.join(bundled)}"
    else:  # an installation without its package data
        known = f"this installation has no bundled contracts (none in {SPECS_DIR}): reinstall layer-conformance"
    raise ContractNotFound(name_or_path, [(None, "(name)", (
        f"no bundled contract named {name_or_path!r}; {known}. Give one of those names, or the path to a "
        "contract of your own (a YAML file, e.g. --contract path/to/mylayer.yaml; see the README's "
        "Contracts section for its keys)"))])
