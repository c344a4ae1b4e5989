"""Every output format is one module of layer_conformance.outputs with the same small interface (its OUTPUT, an
Output), registered in the one list (OUTPUTS); each option docs/options.md lists under "Outputs" belongs to a
registered output, and each output's options are listed there."""
from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

from _pytest.config import default_plugins
from _pytest.config.argparsing import Parser

from layer_conformance import outputs, results
from layer_conformance.outputs import OUTPUTS, SESSION_FINISH, TERMINAL, Output, Result
from layer_conformance.record import Record
from layer_conformance.verdict import verdict

ROOT = Path(__file__).resolve().parents[2]
OPTIONS_DOC = ROOT / "docs" / "options.md"


def _added(output: Output) -> set[str]:
    parser = Parser(_ispytest=True)
    group = parser.getgroup("conformance")
    output.addoption(group, parser)
    return {name for opt in group.options for name in opt.names()}


def _pytest_own() -> set[str]:
    parser = Parser(_ispytest=True)
    for name in default_plugins:
        try:
            module = importlib.import_module(f"_pytest.{name}")
        except ImportError:
            continue
        if hasattr(module, "pytest_addoption"):
            module.pytest_addoption(parser)
    return {name for group in parser._groups for opt in group.options for name in opt.names()} | \
        {name for opt in parser._anonymous.options for name in opt.names()}


def _documented() -> list[str]:
    """The options of the bullets under docs/options.md's "## Outputs", up to the next heading."""
    lines = OPTIONS_DOC.read_text().splitlines()
    start = lines.index("## Outputs")
    out = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        m = re.match(r"^\* `(--[a-z][a-z0-9-]*)", line)
        if m:
            out.append(m.group(1))
    return out


def test_every_output_module_is_registered_once_with_the_interface():
    modules = {m.name for m in pkgutil.iter_modules(outputs.__path__) if m.name != "base"}
    registered = {o.write.__module__.rpartition(".")[2] for o in OUTPUTS}
    assert modules == registered, f"output modules not in OUTPUTS: {sorted(modules - registered)}"
    names = [o.name for o in OUTPUTS]
    assert len(set(names)) == len(names), names
    for output in OUTPUTS:
        module = importlib.import_module(f"layer_conformance.outputs.{output.write.__module__.rpartition('.')[2]}")
        assert module.OUTPUT is output
        assert isinstance(output, Output) and output.name and isinstance(output.options, tuple)
        assert all(o.startswith("--") for o in output.options), output
        assert callable(output.addoption) and callable(output.target) and callable(output.write), output.name
        assert output.at in (SESSION_FINISH, TERMINAL), output
        assert output.configure is None or callable(output.configure), output.name
    assert OUTPUTS[0].name == "json", "the results file is written first: a report never costs it"


def test_each_output_owns_its_options_and_no_two_share_one():
    own = _pytest_own()
    seen: dict[str, str] = {}
    for output in OUTPUTS:
        added = _added(output)
        for option in output.options:
            assert option in added or option in own, f"{output.name}: {option} is neither added nor pytest's"
            assert option not in seen, f"{option}: owned by {seen[option]} and {output.name}"
            seen[option] = output.name
        assert added <= set(output.options), f"{output.name} adds options it does not declare: {added}"


def test_each_output_option_in_the_docs_belongs_to_a_registered_output_and_back():
    documented = _documented()
    assert documented, "docs/options.md lists no output option under ## Outputs"
    owned = {option for output in OUTPUTS for option in output.options}
    assert set(documented) <= owned, f"documented, no registered output owns them: {set(documented) - owned}"
    assert owned <= set(documented), f"owned by an output, not in docs/options.md's Outputs: {owned - set(documented)}"


def _result() -> Result:
    records = [Record(contract="c", impl="m:L", framework="torch", device="cpu", check=check, outcome=outcome,
                      nodeid=f"c.yaml::c[L-torch-cpu]::{check}", message="")
               for check, outcome in (("values", "passed"), ("gradients", "failed"))]
    judged = verdict(records, [r.nodeid for r in records])
    doc = results.document(judged.records, {"seed": 0}, {"complete": True, "planned": 2, "not_run": 0},
                           plan=[r.nodeid for r in records])
    return Result(verdict=judged, records=judged.records, document=doc)


def test_the_file_outputs_write_the_one_result(tmp_path):
    result = _result()
    by_name = {o.name: o for o in OUTPUTS}
    said = by_name["json"].write(result, tmp_path / "r.json")
    assert said == f"results: {tmp_path / 'r.json'}"
    loaded = results.load(tmp_path / "r.json")
    assert [r.key() for r in loaded["results"]] == sorted(r.key() for r in result.records)
    assert by_name["html"].write(result, tmp_path / "r.html").endswith("r.html")
    assert "Layer conformance report" in (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not list(tmp_path.glob(".*.tmp")), "written atomically: no temporary file left"
