"""The HTML report in a real headless Chromium: it renders, a cell opens its details, filters (and the
URL fragment) change what is shown, and hostile text from a layer stays text."""
import json
import os
import re
import shutil
import subprocess
from urllib.parse import quote

import pytest

from layer_conformance.gate import compare
from layer_conformance.report import write_html
from layer_conformance.report import build_data
from layer_conformance.report.html import cell_lines
from tests.support import HOSTILE, SCRIPT_BREAK, buggy_doc, gated_sample, sample_baseline, sample_doc, sample_rec

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium "
                                                          "chromium-driver); the browser tests need a real browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    doc, base = sample_doc(), sample_baseline()
    path = tmp_path_factory.mktemp("report") / "conformance.html"
    write_html(path, doc, comparison=compare(base["results"], doc["results"]), baseline_name="old.json")
    return path


def test_matrix_renders_from_disk(report, tmp_path):
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path}", "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-ready="1"' in dom, "the page script did not finish"
    cells = re.findall(r'<button class="cell ([^"]+)"', dom)
    assert len(cells) == 4, cells           # centered: torch/cpu, torch/cuda; rmsnorm: jax/cpu, torch/cpu
    assert any("s-error" in c and "regressed" in c for c in cells)
    assert "<img" not in dom and "&lt;img src=x onerror=" in dom   # the hostile command line, as text


def test_a_dtype_is_a_row_of_its_own(tmp_path):
    """rmsnorm's bfloat16 checks on torch draw a row with a dtype cell; the cases' own rows read blank there."""
    bf16 = [sample_rec("rmsnorm", "layer_conformance.reference_impls.torch.rmsnorm:IMPL", "torch", check, outcome,
                       dtype="bfloat16", nodeid=f"specs/rmsnorm.yaml::rmsnorm[torch-cpu-bfloat16]::{check}")
            for check, outcome in (("values", "failed"), ("gradients", "passed"))]
    path = write_html(tmp_path / "dtypes.html", sample_doc(bf16))
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path}", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert 'data-ready="1"' in dom, "the page script did not finish"
    assert "<th>dtype</th>" in dom
    (row,) = re.findall(r'<tr data-dtype="bfloat16">(.*?)</tr>', dom)
    assert '<th class="dtype">bfloat16</th>' in row and "s-failed" in row
    assert len(re.findall(r'<button class="cell ', dom)) == 5       # the four above and the bfloat16 row's
    assert '<th class="dtype"></th>' in dom                         # the cases' own dtype: a blank cell


# --- interaction through selenium and the system chromedriver ------------------------------------

@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e .[test])")
    if CHROMEDRIVER is None:
        pytest.skip("no chromedriver on PATH (Debian: apt-get install chromium-driver)")
    from selenium.webdriver.chrome.service import Service
    os.environ.setdefault("SE_OFFLINE", "true")   # never let selenium fetch a browser or a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + ["--window-size=1280,1000", f"--user-data-dir={tmp_path_factory.mktemp('chrome')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _open(browser, report, fragment=""):
    browser.get(report.as_uri() + fragment)
    assert browser.execute_script("return document.documentElement.dataset.ready") == "1"


def _cells(browser):
    from selenium.webdriver.common.by import By
    return browser.find_elements(By.CSS_SELECTOR, "#matrix button.cell")


def _cell(browser, contract, framework, device):
    from selenium.webdriver.common.by import By
    return browser.find_element(By.CSS_SELECTOR, f'#matrix button.cell[data-key^=\'["{contract}",\'][data-key$=\'"{framework}","{device}"]\']')


def test_a_cell_opens_its_checks(browser, report):
    from selenium.webdriver.common.by import By
    _open(browser, report)
    details = browser.find_element(By.ID, "details")
    assert not details.is_displayed()
    cell = _cell(browser, "centered", "torch", "cpu")
    # readable without colour: symbol and word, then every count by name
    assert cell.text.split("\n")[:2] == ["! ERROR", "1 error \u00b7 2 failed \u00b7 1 xfail \u00b7 1 passed"]
    cell.click()
    assert details.is_displayed()
    rows = {r.get_attribute("data-check"): r for r in details.find_elements(By.CSS_SELECTOR, "tr.check-row")}
    assert set(rows) == {"parameters", "serialization", "devices", "values", "gradients"}
    values = rows["values"].text
    assert "FAIL" in values and "newly failing (was passed)" in " ".join(values.split())   # the badge may wrap
    assert "largest error\n0.5" in values and "rtol\n1.3e-06" in values and "atol\n0.0001" in values
    assert "pytest --contract centered --impl mypkg.layers:Centered --framework torch --check values" in values
    assert "expected failure: upstream bug" in rows["gradients"].text and "xfail" in rows["gradients"].text
    assert "open=" in browser.current_url       # the open cell is part of the link
    browser.find_element(By.ID, "details-close").click()
    assert not details.is_displayed()


def test_filters_change_the_matrix_and_live_in_the_fragment(browser, report):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    _open(browser, report)
    assert len(_cells(browser)) == 4
    Select(browser.find_element(By.ID, "f-framework")).select_by_value("jax")
    assert len(_cells(browser)) == 1 and "framework=jax" in browser.current_url
    assert browser.find_element(By.ID, "f-count").text == "4 of 14 checks shown"
    browser.find_element(By.ID, "f-reset").click()
    browser.find_element(By.ID, "f-status-passed").click()      # hide passing checks
    assert "outcome=" in browser.current_url and "passed" not in browser.current_url.split("outcome=")[1]
    search = browser.find_element(By.ID, "f-q")
    search.send_keys("serialization")
    assert len(_cells(browser)) == 1 and browser.find_element(By.ID, "f-count").text == "1 of 14 checks shown"

    # a linked view: only failures and errors, the torch/cpu cell open
    _open(browser, report, "#outcome=failed,error&device=cpu")
    cells = _cells(browser)
    assert len(cells) == 1 and cells[0].text.split("\n")[:2] == ["! ERROR", "1 error \u00b7 2 failed"]
    assert not browser.find_element(By.ID, "f-status-passed").is_selected()
    assert browser.find_element(By.ID, "f-status-failed").is_selected()
    assert Select(browser.find_element(By.ID, "f-device")).first_selected_option.text == "cpu"
    # editing the fragment by hand re-renders too
    browser.execute_script("location.hash = 'contract=rmsnorm'")
    assert [c.get_attribute("data-key").split(",")[0] for c in _cells(browser)] == ['["rmsnorm"', '["rmsnorm"']


def test_hostile_text_is_shown_as_text_and_never_runs(browser, report):
    from selenium.webdriver.common.by import By
    _open(browser, report)
    _cell(browser, "centered", "torch", "cpu").click()
    row = browser.find_element(By.CSS_SELECTOR, '#details tr[data-check="devices"]')
    assert row.find_element(By.CSS_SELECTOR, "pre.msg").text == HOSTILE + SCRIPT_BREAK
    assert browser.execute_script("return document.querySelectorAll('img, iframe').length") == 0
    assert browser.execute_script("return document.scripts.length") == 2
    assert browser.execute_script("return window.__pwned === undefined")
    # an expectations link that is not a web link stays text
    assert browser.execute_script("return document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    assert "javascript:alert(1)" in browser.find_element(By.CSS_SELECTOR, '#details tr[data-check="gradients"]').text
    prov = browser.find_element(By.ID, "prov").text
    assert HOSTILE in prov and "seed 7" in prov.replace("\n", " ")


def test_the_baseline_diff_is_shown(browser, report):
    from selenium.webdriver.common.by import By
    _open(browser, report)
    text = browser.find_element(By.ID, "baseline").text
    assert "2 newly failing, 0 newly passing, 2 unchanged failing" in text and "3 regression(s)" in text
    assert "no longer run" in text and "composition" in text


def test_cells_read_as_counts_by_name(browser, report, tmp_path):
    """The issue's cell (7 failed, 1 passed, 6 skipped, once drawn "FAIL 1/8") and every cell of the sample
    report read exactly as html.cell_lines says, in the page as drawn by its script."""
    from selenium.webdriver.common.by import By
    buggy = write_html(tmp_path / "buggy.html", buggy_doc())
    _open(browser, buggy)
    (cell,) = _cells(browser)
    assert cell.text.split("\n") == ["\u2717 FAIL", "7 failed \u00b7 1 passed \u00b7 6 skipped"]
    # with the failures hidden by a filter the cell counts what it shows
    browser.find_element(By.ID, "f-status-failed").click()
    assert _cells(browser)[0].text.split("\n") == ["\u2713 pass", "1 passed \u00b7 6 skipped"]

    doc, base = sample_doc(), sample_baseline()
    data = build_data(doc, compare(base["results"], doc["results"]))
    _open(browser, report)
    drawn = {c.get_attribute("data-key"): c.text.split("\n") for c in _cells(browser)}
    assert len(drawn) == 4
    for key, lines in drawn.items():
        contract, row, framework, device = json.loads(key)
        mine = [c for c in data["checks"] if (c["contract"], c["row"], c["framework"], c["device"])
                == (contract, row, framework, device)]
        assert lines == cell_lines(mine), key


# --- the layout at the widths people read it at -------------------------------------------------

@pytest.fixture(scope="module")
def gated_report(tmp_path_factory):
    doc, base = gated_sample()
    path = tmp_path_factory.mktemp("gated") / "conformance.html"
    write_html(path, doc, comparison=compare(base["results"], doc["results"]), baseline_name="old.json")
    return doc, path


# every badge in the diff and the details against its own cell and the row's message; every check name's cell
LAYOUT = """
function box(e) { return e.getBoundingClientRect(); }
function overlap(a, b) { return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom; }
function inside(a, b) { return a.left >= b.left - 0.5 && a.right <= b.right + 0.5; }
var out = {overlaps: [], outside: [], clipped: [], badges: 0, names: 0};
document.querySelectorAll("#details tr.check-row, #baseline tbody tr").forEach(function (tr) {
  var msg = tr.querySelector("td.message");
  tr.querySelectorAll(".badge").forEach(function (b) {
    out.badges++;
    if (msg && overlap(box(b), box(msg))) out.overlaps.push(tr.dataset.check + ": " + b.textContent);
    if (!inside(box(b), box(b.closest("td, th")))) out.outside.push(tr.dataset.check + ": " + b.textContent);
  });
});
document.querySelectorAll("#details tr.check-row > th, #details .check-name, #baseline tbody td:nth-child(2)")
  .forEach(function (e) { out.names++; if (e.scrollWidth > e.clientWidth) out.clipped.push(e.textContent); });
return out;
"""


@pytest.mark.parametrize("width", [1400, 1000])
def test_badges_and_check_names_fit_their_cells(browser, report, gated_report, width):
    """A change badge never runs into the message beside it and no check name is cut ("compositic"),
    whether the details sit beside the matrix (the sample at 1400 px) or below it."""
    size = browser.get_window_size()
    found = {}
    try:
        browser.set_window_size(width, 1000)
        for page in (report, gated_report[1]):
            _open(browser, page, "#open=" + quote(json.dumps(["centered", "mypkg.layers:Centered", "torch", "cpu"],
                                                             separators=(",", ":"))))
            found[page.parent.name] = browser.execute_script(LAYOUT)
            found[page.parent.name]["beside"] = browser.execute_script(
                "return document.getElementById('details').getBoundingClientRect().top"
                " < document.getElementById('matrix').getBoundingClientRect().bottom")
    finally:
        browser.set_window_size(size["width"], size["height"])
    assert [f["beside"] for f in found.values()] == [width == 1400, False], found   # both layouts measured
    for f in found.values():
        assert f["badges"] >= 12 and f["names"] >= 11, found    # the rows were there to measure
        assert f["overlaps"] == [] and f["outside"] == [], found
        assert f["clipped"] == [], found


def test_the_regression_table_has_each_message_and_the_blocked_under_their_failure(browser, gated_report):
    doc, path = gated_report
    _open(browser, path)
    head = browser.execute_script("return [...document.querySelectorAll('#baseline thead th')].map(t => t.textContent)")
    assert head[-1] == "message"
    rows = browser.execute_script("""return [...document.querySelectorAll('#baseline tbody tr')].map(tr =>
        [tr.dataset.check, tr.className, tr.cells[0].textContent, tr.querySelector('td.message').textContent])""")
    message = {r["check"]: r["message"] for r in doc["results"] if r["contract"] == "centered" and r["device"] == "cpu"}
    # one mistake, listed once: what values' failure newly blocks is one row under it, folded (open to list them)
    folded = rows[2][3]
    rows[2][3] = folded.split("blocked by values")[0] + "blocked by values"
    assert rows == [
        ["devices", "", "\u25b2 newly failing", message["devices"]],
        ["values", "", "\u25b2 newly failing", message["values"]],
        ["composition", "under", "\u2298 newly blocked by values", "1 check newly blocked by values"],
        ["second_order", "", "\u25b2 newly skipped", message["second_order"]],
        ["parameters", "", "\u25bc newly passing", ""],
    ]
    assert "composition centered \u00b7 mypkg.layers:Centered \u00b7 torch / cpu (was passed)" in folded, folded
    assert "3 regression(s)" in browser.find_element("id", "baseline").text


def test_many_newly_blocked_checks_are_one_folded_row(browser, tmp_path):
    """A new failure that blocks a dozen checks does not fill the first screen: one row, closed, under it."""
    from tests.support import sample_rec as rec
    doc, base = gated_sample()
    impl = "mypkg.layers:Centered"
    more = ["serialization", "devices", "device_parity", "native", "gradients", "strict_loading", "modes",
            "properties", "forward_mode", "batching", "layout"]
    extra = [rec("centered", impl, "torch", c, "blocked", "not run: blocked by values (the output is wrong)",
                 blocked_by="values") for c in more]
    doc["results"] = [r for r in doc["results"] if r["check"] not in more or r["contract"] != "centered"] + extra
    base["results"] = [r for r in base["results"] if r["check"] not in more or r["contract"] != "centered"] + \
        [rec("centered", impl, "torch", c, "passed") for c in more]
    path = tmp_path / "many.html"
    write_html(path, doc, comparison=compare(base["results"], doc["results"]), baseline_name="old.json")
    _open(browser, path)
    rows = browser.execute_script("return [...document.querySelectorAll('#baseline tbody tr')].map(tr => "
                                  "[tr.className, tr.dataset.blocked || '', tr.offsetHeight])")
    under = [r for r in rows if r[0] == "under"]
    assert len(under) == 1 and under[0][1] == str(len(more) + 1), rows
    assert under[0][2] <= 1.5 * rows[0][2], rows   # closed: about one row's height (the new failure's), not a dozen


def test_the_changed_since_selection_is_shown(browser, tmp_path):
    from tests.support import SELECTION
    path = tmp_path / "selection.html"
    write_html(path, dict(sample_doc(), selection=SELECTION))
    _open(browser, path)
    section = browser.find_element("id", "selection")
    assert section.is_displayed()
    text = browser.execute_script("return document.getElementById('selection').textContent")
    assert "Changed since origin/main" in text and "1 binding(s) selected, 1 untouched" in text, text
    assert "centered mypkg.layers:Centered: mypkg/layers.py changed (the implementation's module)" in text, text
    assert "rmsnorm mypkg.norms:RMSNorm" in text and "no file each imports changed" in text, text
    assert "README.md: not an implementation" in text, text


def test_the_search_placeholder_is_not_clipped(browser, report):
    _open(browser, report)
    fits = browser.execute_script("""
        var q = document.getElementById('f-q'), s = getComputedStyle(q);
        var ctx = document.createElement('canvas').getContext('2d');
        ctx.font = s.font;
        var room = q.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
        return [ctx.measureText(q.placeholder).width, room];""")
    assert fits[0] <= fits[1], fits
