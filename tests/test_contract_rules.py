"""The contract's rules have one owner per section: every top-level key of the schema has its validator
in ``SECTION_RULES``, run at load; a rule that the contract alone decides is reported at load (exit 3,
file:line:field), never by a check while it runs; the frameworks' names come from their registry."""
import json

import pytest

from layer_conformance.contract import SCHEMA_PATH, SECTION_RULES, ContractError, schema
from layer_conformance.contract.rules import _Rules
from layer_conformance.contract.yaml_lines import _load_with_lines
from layer_conformance.reference_check import load_checked, reference_names  # as a run loads a contract
from layer_conformance.frameworks import FRAMEWORKS, Framework
from tests.support import ROOT, pytest_run

HOSTILE = ROOT / "tests" / "hostile_contracts"

# rules that checks used to raise while running, now decided at load: (fixture, field, fragment)
MOVED = [
    ("native_function_on_layer", "native.jax.function", "is a function but the contract is a layer"),
    ("native_gradients_unknown_case", "native_gradients.record[0]", "'moderate' names no case"),
    ("second_order_rules", "second_order.reference", "has no function 'hessian_vector'"),
    ("second_order_rules", "second_order.cases[1]", "'moderate' names no case"),
    ("second_order_nothing_differentiable", "second_order", "no case it names has a differentiable input"),
    ("forward_mode_rules", "forward_mode.worked_examples[0]", "do not match the first case's inputs"),
    ("forward_mode_rules", "forward_mode", "compared with the reference's vjp"),
    ("modes_rules", "modes.train.rate", "is not a dropout rate"),
    ("modes_rules", "modes.train.input", "holds exact zeros"),
    ("mean_square_without_eps", "properties[0].kind", "needs a numeric constructor argument 'eps'"),
    ("strict_loading_slots", "strict_loading.slots[0]", "'bias' is not a state slot of this contract"),
    ("wrt_integer_input", "gradients.wrt[1]", "only floating inputs have gradients"),
    ("dtypes_rules", "dtypes", "no case runs in float32, the cases' own dtype"),
    # per-case dtypes are the dtypes section's (it owns every dtypes list, wherever it is written)
    ("dtypes_rules", "cases[1].dtypes", "the case has no floating input to cast"),
    ("accumulate_without_16bit", "accumulate", "declares no 16-bit dtype"),
]


def test_every_schema_section_has_its_validator():
    assert set(SECTION_RULES) == set(schema()["properties"])
    assert all(callable(rules) for rules in SECTION_RULES.values())


def test_each_section_validator_reports_in_its_own_section():
    # every moved rule is reported by its section's validator alone, at the field it names
    for name, fld, fragment in MOVED:
        section = "dtypes" if fld.endswith(".dtypes") else fld.split(".")[0].split("[")[0]
        data, lines, _, _ = _load_with_lines((HOSTILE / f"{name}.yaml").read_text())
        r = _Rules(data, lines, 10 ** 6, reference_names)
        SECTION_RULES[section](r)
        assert any(p[1] == fld and fragment in p[2] for p in r.problems), (name, r.problems)
        others = _Rules(data, lines, 10 ** 6, reference_names)
        for key, rules in SECTION_RULES.items():
            if key != section:
                rules(others)
        assert not any(p[1] == fld for p in others.problems), (name, section, others.problems)


@pytest.mark.parametrize("name,fld,fragment", MOVED, ids=[f"{m[0]}-{m[1]}" for m in MOVED])
def test_moved_rule_is_a_contract_error_at_load(name, fld, fragment):
    path = HOSTILE / f"{name}.yaml"
    with pytest.raises(ContractError) as info:
        load_checked(path)
    line = next(p[0] for p in info.value.problems if p[1] == fld)
    assert f"{path}:{line}: {fld}: " in str(info.value) and fragment in str(info.value)


def test_cli_moved_rules_exit_3_before_any_check(tmp_path):
    """Every moved rule's contract in one run (a run reports every contract's problems, each file's once)."""
    paths = [HOSTILE / f"{name}.yaml" for name in sorted({m[0] for m in MOVED})]
    proc = pytest_run(*[a for p in paths for a in ("--contract", str(p))], cwd=tmp_path,
                      env={"PYTHONPATH": str(ROOT)}, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "Traceback" not in out and "collected" not in out
    for fixture, fld, fragment in MOVED:  # each problem said once
        path = HOSTILE / f"{fixture}.yaml"
        said = [line for line in out.splitlines() if f"{path}:" in line and f": {fld}: " in line and fragment in line]
        assert len(said) == 1, (fixture, fld, out)


def test_schema_takes_the_frameworks_names_and_export_formats_from_the_registry(monkeypatch):
    s = schema()
    assert s["$defs"]["framework"]["enum"] == list(FRAMEWORKS)
    assert s["$defs"]["export_format"]["enum"] == [x for f in FRAMEWORKS.values() for x in f.export_formats]
    for section in ("native", "frameworks"):
        assert s["properties"][section]["propertyNames"] == {"$ref": "#/$defs/framework"}
    # the file itself lists none: the registry is their one owner
    raw = json.loads(SCHEMA_PATH.read_text())
    assert raw["$defs"]["framework"]["enum"] == [] and raw["$defs"]["export_format"]["enum"] == []
    monkeypatch.setitem(FRAMEWORKS, "paddle", Framework("paddle", "paddle", ("paddlepaddle",), ("paddle.jit",)))
    s = schema()
    assert "paddle" in s["$defs"]["framework"]["enum"] and "paddle.jit" in s["$defs"]["export_format"]["enum"]


def test_an_unknown_framework_is_named_as_one(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: c\nkind: function\ncases: [{name: a, inputs: {x: {shape: [2], dtype: float32}}}]\n"
                    "reference: {module: layer_conformance.reference_impls.numpy.log1pexp}\n"
                    "frameworks: {paddle: {not_applicable: no}}\n")
    with pytest.raises(ContractError, match=r"c.yaml:5: frameworks.paddle: unknown framework 'paddle' \(known: "
                                            + ", ".join(FRAMEWORKS)):
        load_checked(path)
