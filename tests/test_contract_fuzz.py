"""Fuzz the contract loader: mutated bundled contracts give a usable Contract or a ContractError,
never another exception.

Mutations work on the parsed data (drop a key, change a type, swap two values, insert a junk key,
perturb a number) or on the YAML text (delete, duplicate or swap lines, insert YAML syntax and
hostile tags). Deterministic and small enough for CI: derandomized, no example database.
"""
import copy
import math

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layer_conformance import inputs as inputs_mod
from layer_conformance.contract import Contract, ContractError, bundled_contracts
from layer_conformance.reference_check import load_checked
from layer_conformance.reference_run import reference

BUNDLED = {name: path.read_text() for name, path in bundled_contracts().items()}
JUNK_VALUES = [None, 0, -1, 3, 1.5, -2.5, float("nan"), float("inf"), 10**30, 10**400, True, "", "x", "$nope", "d",
               [], [1, 2], [[1.0], [2.0, 3.0]], {}, {"zzz": 1}, {"draw": "normal"}, "float32", "literal"]
TEXT_SNIPPETS = [":", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "*nope", "<<: *a\n", "!!python/object/apply:os.system ['true'] ",
                 "!custom ", "? ", "|\n", ">\n", "#", "'", '"', "\t", "\n  ", "%YAML 1.1\n", "---\n", "...\n",
                 "2024-02-30", "0x1F", ".nan", "~", "\x00", "\ufeff", "\u00e9"]

settings.register_profile("contract-fuzz", max_examples=150, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _paths(data, at=()):
    """Every (container path, key) in the parsed contract."""
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append(at + (k,))
            out += _paths(v, at + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append(at + (i,))
            out += _paths(v, at + (i,))
    return out


def _get(data, path):
    for p in path:
        data = data[p]
    return data


def _scalars(data):
    # dotted strings (class and module paths) are left out: moved into reference.module they
    # would import a framework into the test process
    return [v for p in _paths(data) for v in [_get(data, p)]
            if not isinstance(v, (dict, list)) and not (isinstance(v, str) and "." in v)]


@st.composite
def mutated_data(draw):
    name = draw(st.sampled_from(sorted(BUNDLED)))
    data = yaml.safe_load(BUNDLED[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(["drop", "retype", "swap", "junk_key", "perturb"]))
        if op == "drop":
            del parent[key]
        elif op == "retype":
            parent[key] = copy.deepcopy(draw(st.sampled_from(JUNK_VALUES)))
        elif op == "swap":
            parent[key] = copy.deepcopy(draw(st.sampled_from(_scalars(data) or [None])))
        elif op == "junk_key":
            target = _get(data, path) if isinstance(_get(data, path), dict) else parent
            if isinstance(target, dict):
                target[draw(st.sampled_from(["zzz", "shape", "value", "rows", "class", "none", "skip", 7]))] = \
                    copy.deepcopy(draw(st.sampled_from(JUNK_VALUES)))  # shared values must not be mutated later
        elif op == "perturb":
            value = parent[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                parent[key] = draw(st.sampled_from([-value, 0, value + 1, value * 1000, value * 1e9, float("nan"),
                                                    float(value) + 0.5]))
            elif isinstance(value, list) and value:
                del value[draw(st.integers(0, len(value) - 1))]
    return yaml.safe_dump(data, sort_keys=False)


@st.composite
def corrupted_text(draw):
    lines = BUNDLED[draw(st.sampled_from(sorted(BUNDLED)))].splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete_line", "duplicate_line", "swap_lines", "insert", "cut"]))
        if op == "delete_line" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate_line":
            lines.insert(i, lines[i])
        elif op == "swap_lines":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op in ("insert", "cut"):
            line = lines[i]
            pos = draw(st.integers(0, len(line)))
            if op == "insert":
                lines[i] = line[:pos] + draw(st.sampled_from(TEXT_SNIPPETS)) + line[pos:]
            else:
                lines[i] = line[:pos] + line[pos + draw(st.integers(1, 12)):]
    return "".join(lines)


def _usable(contract: Contract):
    """What the checks do first with a contract must work on any contract that loaded."""
    assert contract.name and contract.kind in ("layer", "function")
    for case in contract.cases:
        for name, spec in case.inputs.items():
            shape = contract.shape(spec.shape) if spec.shape is not None else np.shape(spec.value)
            if math.prod(shape) <= 1_000_000:
                inputs_mod.make_input(contract, case.name, name, spec, seed=0)
    for slot in {**contract.trainable, **contract.non_trainable}.values():
        contract.shape(slot.shape)
    for spec in contract.native.values():
        for v in [*spec.args.values(), *spec.call.kwargs.values()]:
            contract.resolve_arg(v)
    reference(contract)


@settings(settings.get_profile("contract-fuzz"))
@given(text=st.one_of(mutated_data(), corrupted_text()))
def test_mutated_contract_loads_or_reports(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz", numbered=True) / "contract.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        contract = load_checked(path)
    except ContractError as exc:
        assert exc.problems and str(exc).startswith("invalid contract")
        for line, fld, msg in exc.problems:
            assert line is None or (isinstance(line, int) and line >= 1)
            assert isinstance(fld, str) and fld and isinstance(msg, str) and msg
        return
    _usable(contract)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_fuzzer_starts_from_valid_contracts(name, tmp_path):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(BUNDLED[name]), sort_keys=False))
    _usable(load_checked(path))
