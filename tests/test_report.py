"""The HTML report and the command line (rendering only; tests/test_browser.py drives a browser)."""
import importlib.util
import json
import re
import subprocess
import sys

import pytest

from layer_conformance import results
from layer_conformance.cli import main as cli_main
from layer_conformance.gate import compare
from layer_conformance.report import build_data, render_html, repro_command, write_html
from tests.support import (HOSTILE, SCRIPT_BREAK, SELECTION, buggy_doc, gated_sample, pytest_run, sample_baseline,
                           sample_doc, sample_rec)


def embedded(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="conformance-data">(.*?)</script>', html, re.S)
    assert m, "no embedded data block"
    return json.loads(m.group(1))


def test_page_is_self_contained_and_embeds_every_record_once():
    doc = sample_doc()
    html = render_html(doc)
    assert html.count('id="conformance-data"') == 1
    data = embedded(html)
    assert len(data["checks"]) == len(doc["results"])
    # nothing is fetched: no external scripts, styles, fonts or images
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', html, re.I)
    assert "http://" not in html and "https://" not in html and "@import" not in html
    assert "default-src 'none'" in html


def test_hostile_text_cannot_leave_the_data_block():
    html = render_html(sample_doc())
    assert HOSTILE not in html and "</script><script>window.__pwned" not in html
    assert html.count("</script>") == 2       # the data block and the page script, nothing injected
    messages = [c["message"] for c in embedded(html)["checks"]]
    assert HOSTILE + SCRIPT_BREAK in messages  # the text survives intact, as data
    assert "innerHTML" not in html and "insertAdjacentHTML" not in html and "document.write" not in html


def test_statuses_numbers_and_repro_commands():
    data = build_data(sample_doc())
    by = {(c["contract"], c["framework"], c["device"], c["check"]): c for c in data["checks"]}
    values = by[("centered", "torch", "cpu", "values")]
    assert values["status"] == "failed"
    assert values["numbers"] == {"max_abs_error": 0.5, "rtol": "1.3e-06", "atol": "0.0001"}
    assert values["repro"] == ("pytest --contract centered --impl mypkg.layers:Centered --framework torch "
                               "--check values --seed 7")
    assert by[("centered", "torch", "cpu", "gradients")]["status"] == "xfail"
    assert by[("rmsnorm", "torch", "cpu", "native")]["status"] == "n/a"
    assert by[("rmsnorm", "jax", "cpu", "values")]["row"] == "reference"
    assert "--device cuda" in by[("centered", "torch", "cuda", "values")]["repro"]
    bundled = by[("rmsnorm", "jax", "cpu", "values")]["repro"]
    assert bundled == "pytest --contract rmsnorm --impl layer_conformance.reference_impls.jax.rmsnorm:IMPL --framework jax --check values --seed 7"


def test_repro_quotes_a_user_contract_path():
    rec = sample_rec("mine", "pkg.mod:Layer", "torch", "values", "failed")
    rec["nodeid"] = "my contracts/mine.yaml::mine[Layer-torch-cpu]::values"
    assert repro_command(rec) == "pytest --contract 'my contracts/mine.yaml' --impl pkg.mod:Layer --framework torch --check values"


def test_repro_names_a_user_contract_of_a_bundled_name_by_its_path():
    # a user's rmsnorm.yaml is not the bundled rmsnorm: `--contract rmsnorm` would rerun the bundled one
    rec = sample_rec("rmsnorm", "pkg.mod:Layer", "torch", "values", "failed")
    rec["nodeid"] = "rmsnorm.yaml::rmsnorm[Layer-torch-cpu]::values"
    rec["options"] = {"contract": "contracts/rmsnorm.yaml"}
    assert repro_command(rec) == "pytest --contract contracts/rmsnorm.yaml --impl pkg.mod:Layer --framework torch --check values"


def test_baseline_diff_is_embedded():
    doc, base = sample_doc(), sample_baseline()
    comparison = compare(base["results"], doc["results"])
    assert comparison.summary().startswith("2 newly failing, 0 newly passing, 2 unchanged failing")
    data = build_data(doc, comparison, "old.json")
    assert data["baseline"]["regressions"] == 3   # two newly failing + composition no longer run
    assert [d["check"] for d in data["baseline"]["disappeared"]] == ["composition"]
    changed = {c["check"]: (c["change"], c["was"]) for c in data["checks"] if c["change"]}
    assert changed["values"] == ("newly_failing", "passed")
    assert changed["serialization"] == ("unchanged_failing", "error")


def test_the_diff_lists_a_check_newly_blocked_under_its_new_failure():
    doc, base = gated_sample()
    comparison = compare(base["results"], doc["results"])
    data = build_data(doc, comparison, "old.json")
    checks = data["checks"]
    changed = [(checks[i]["check"], checks[i]["change"]) for i in data["baseline"]["changed"]]
    assert changed == [("devices", "newly_failing"), ("values", "newly_failing"),
                       ("composition", "newly_blocked"), ("second_order", "newly_skipped")]
    (blocked,) = [c for c in checks if c["change"] == "newly_blocked"]
    assert checks[blocked["under"]]["check"] == "values" and blocked["was"] == "passed"
    assert all(c["under"] is None for c in checks if c is not blocked)
    assert [checks[i]["check"] for i in data["baseline"]["fixed"]] == ["parameters"]
    assert data["baseline"]["regressions"] == 3   # devices, values, second_order: the blocked one is values'


def test_non_finite_numbers_survive_json_parse(tmp_path):
    doc = sample_doc([sample_rec("centered", "x:Y", "torch", "values", "failed", "nan",
                                 details={"max_abs_error": float("nan")})])
    data = embedded(write_html(tmp_path / "r.html", doc).read_text())
    assert any(c["numbers"].get("max_abs_error") == "nan" for c in data["checks"])


def test_cli_report_and_merge(tmp_path, capsys):
    a = sample_doc()
    b = results.document([sample_rec("centered", "m:C", "mxnet", "values", "passed")],
                         results.environment({"mxnet": "1.9.1"}, {"mxnet": ["cpu"]}, 7))
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    (tmp_path / "old.json").write_text(json.dumps(sample_baseline()))
    assert cli_main(["merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "c.json")]) == 0
    merged = json.loads((tmp_path / "c.json").read_text())
    assert len(merged["results"]) == len(a["results"]) + 1 and merged["environment"]["frameworks"]["mxnet"] == "1.9.1"
    assert cli_main(["report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "r.html"),
                     "--baseline", str(tmp_path / "old.json")]) == 0
    out = capsys.readouterr().out
    assert "2 newly failing, 0 newly passing, 2 unchanged failing" in out
    data = embedded((tmp_path / "r.html").read_text())
    assert {c["framework"] for c in data["checks"]} == {"torch", "jax", "mxnet"}
    assert data["baseline"]["name"].endswith("old.json")


def test_cli_usage_errors_exit_4(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    assert cli_main(["report", str(tmp_path / "bad.json"), "-o", str(tmp_path / "r.html")]) == 4
    assert "bad.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["report", "-o", "x.html"])
    assert exc.value.code == 4


def test_python_dash_m_entry_point(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(sample_doc()))
    proc = subprocess.run([sys.executable, "-m", "layer_conformance", "report", str(tmp_path / "a.json"), "-o",
                           str(tmp_path / "r.html")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.html").exists()


def test_an_absent_device_is_marked_unavailable_not_failed():
    from layer_conformance.report.html import build_data
    rec = {"contract": "rmsnorm", "impl": "m:L", "framework": "torch", "device": "cuda", "check": "values",
           "outcome": "skipped", "message": "no CUDA device for torch here", "unavailable": True}
    ok = dict(rec, device="cpu", outcome="passed", message="", unavailable=False)
    data = build_data({"schema_version": 1, "results": [rec, ok], "environment": {}})
    by_device = {c["device"]: c for c in data["checks"]}
    assert by_device["cuda"]["unavailable"] is True and by_device["cuda"]["status"] == "skipped"
    assert by_device["cpu"]["unavailable"] is False


def _cells(data):
    cells = {}
    for c in data["checks"]:
        cells.setdefault((c["contract"], c["row"], c["framework"], c["device"]), []).append(c)
    return cells


def test_a_cell_names_its_failed_and_passed_counts():
    from layer_conformance.report.html import cell_lines
    (cell,) = _cells(build_data(buggy_doc())).values()
    assert cell_lines(cell) == ["\u2717 FAIL", "7 failed \u00b7 1 passed \u00b7 6 skipped"]
    doc, base = sample_doc(), sample_baseline()
    cells = _cells(build_data(doc, compare(base["results"], doc["results"])))
    assert cell_lines(cells[("centered", "mypkg.layers:Centered", "torch", "cpu")]) == \
        ["! ERROR", "1 error \u00b7 2 failed \u00b7 1 xfail \u00b7 1 passed", "\u25b2 regression"]
    assert cell_lines(cells[("rmsnorm", "reference", "jax", "cpu")]) == ["\u2713 pass", "3 passed \u00b7 1 n/a"]
    assert cell_lines(cells[("centered", "mypkg.layers:Centered", "torch", "cuda")]) == \
        ["\u2205 unavailable", "no such device here"]
    two_errors = [dict(c, status="error") for c in cells[("rmsnorm", "reference", "jax", "cpu")][:2]]
    assert cell_lines(two_errors)[1] == "2 errors"


def test_the_page_draws_cells_with_the_same_words():
    from layer_conformance.report.html import COUNT_WORDS, LOOK
    data = embedded(render_html(buggy_doc()))
    assert data["look"] == LOOK and data["count_words"] == COUNT_WORDS


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_dtype_the_contract_adds_is_a_row_of_its_own(tmp_path):
    """A small real run (centered, which declares dtypes, on torch): the bfloat16 checks are a row of their
    own, keyed apart from the cases' own dtype, and their reproduction selects that dtype's target."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = pytest_run("--contract", "centered", "--framework", "torch", "--check", "values", "--check",
                      "parameters", "--conformance-json", "out.json", "--conformance-html", "out.html",
                      "-n", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (tmp_path / "out.html").read_text()
    data = embedded(html)
    rows = {(c["dtype"], c["check"]): c for c in data["checks"]}
    assert set(rows) == {("", "values"), ("", "parameters"), ("bfloat16", "values"), ("float16", "values"),
                         ("float64", "values")}
    bf16 = rows[("bfloat16", "values")]
    assert bf16["status"] == "passed" and bf16["row"] == "reference"
    assert "-k torch-cpu-bfloat16" in bf16["repro"] and "-k" not in rows[("", "values")]["repro"]
    # the page draws a dtype column and keys a dtype's row apart (the cases' own keeps its 4-part key)
    assert 'el("th", null, ["dtype"])' in html and "tr.dataset.dtype = r[2]" in html
    assert "cellKey(c.contract, c.row, c.framework, c.device, c.dtype)" in html


# --- --changed-since's selection, newly blocked checks folded under their failure, the search box -----------------

def test_the_report_shows_what_changed_since_selected_and_why():
    """The results file's `selection`: the bindings that ran and why, those untouched and why, the files that select
    none. Before, the report left it out."""
    doc = dict(sample_doc(), selection=SELECTION)
    data = embedded(render_html(doc))
    sel = data["selection"]
    assert sel["changed_since"] == "origin/main" and sel["untouched"] == 1
    assert sel["selected"] == SELECTION["selected"]
    assert sel["untouched_bindings"] == [{"contract": "rmsnorm", "impl": "mypkg.norms:RMSNorm"}]
    assert sel["unmapped"] == SELECTION["unmapped"]
    page = render_html(doc)
    assert '<section id="selection" hidden></section>' in page and "function selection()" in page
    assert embedded(render_html(sample_doc()))["selection"] is None    # no --changed-since: no section drawn


def test_newly_blocked_checks_are_folded_under_the_failure_that_blocks_them():
    doc, base = gated_sample()
    data = build_data(doc, compare(base["results"], doc["results"]), "old.json")
    checks = data["checks"]
    (values,) = [i for i, c in enumerate(checks) if c["check"] == "values" and c["change"] == "newly_failing"]
    folded = data["baseline"]["blocked_under"]
    assert {checks[int(k)]["check"]: [checks[i]["check"] for i in v] for k, v in folded.items()} == \
        {"values": ["composition"]}
    assert str(values) in folded
    page = render_html(doc, comparison=compare(base["results"], doc["results"]))
    assert "folded into the row under the failure that blocks it" in page


def test_the_search_box_is_wide_enough_for_its_placeholder():
    page = render_html(sample_doc())
    placeholder = re.search(r'id="f-q" type="search" placeholder="([^"]*)"', page).group(1)
    width = re.search(r"#f-q \{ width: (\d+)ch; \}", page)
    assert width, "the search box has no width of its own (the browser's default cuts the placeholder)"
    assert int(width.group(1)) >= len(placeholder) + 2, (width.group(0), placeholder)
