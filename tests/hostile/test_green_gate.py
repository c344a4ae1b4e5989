"""A green gate means every check passed: the ways a wrong layer reached exit 0 before, each through the public
command line from a user's directory (the eps-outside-the-square-root RMSNorm, or one that always raises).

- an n/a said in the layer's own process: the forward compiled under the adapter's file name (so that the old
  frame test took it for the adapter's), or the harness's classifier patched; now an n/a is weighed by its
  reason's code against the check's closed list (check_catalog.NA_REASONS), and one that rests on the layer's
  word is listed by the gate and fails under --strict-na;
- "blocked by" a check that passed (a layer whose later instances cache a plain tensor), or by one that a
  narrowed run (--check) never ran, or by a failure to send a message (a lone surrogate): blocked now stands
  only on a failure this run recorded (verdict.settle);
- escape sequences in a failure message that wipe the real lines in a terminal: every output shows them inert.
"""
import json

import pytest

from tests.support import ROOT, USER_LAYERS, pytest_run, user_package

pytest.importorskip("torch")

# the README's torch RMSNorm with eps outside the square root
_RIGHT = ("return x * torch.rsqrt(x.to(torch.promote_types(x.dtype, torch.float32)).pow(2).mean(-1, keepdim=True) "
          "+ self.eps).to(x.dtype) * self.gain")
assert _RIGHT in USER_LAYERS["torch"]
EPS_OUTSIDE = USER_LAYERS["torch"].replace(
    _RIGHT, "return self.gain * x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)")

# the forward of the wrong layer, compiled as if it were the adapter's own code, says n/a outside float32
FORGED_NA = EPS_OUTSIDE + '''

import layer_conformance.layerside.torch.core as _adapter
from layer_conformance.record import NotApplicable

_SOURCE = """
def forged(dtype, code):
    raise NotApplicable(f"the adapter cannot run {dtype} here", code=code)
"""
_space = {"NotApplicable": NotApplicable}
exec(compile(_SOURCE, _adapter.__file__, "exec"), _space)


class Forged(RMSNorm):
    """Right in float32; wrong (eps outside) in every other dtype, where it says n/a as the adapter would."""
    code = ""

    def forward(self, x):
        if x.dtype != torch.float32:
            _space["forged"](x.dtype, self.code)
            return super().forward(x)
        return self.gain * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class ForgedCast(Forged):
    code = "no_cast"   # a reason the layer's process may give: taken, listed, and failed by --strict-na
'''

# the eps-outside layer whose every instance after the first caches a plain tensor, as RoPE caches often do
LATER_CACHE = EPS_OUTSIDE + '''

class Cached(RMSNorm):
    made = 0

    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        Cached.made += 1
        if Cached.made > 1:
            self.eps_t = torch.full((d,), eps)
'''

RAISES = '''
import torch
from torch import nn


class Raises(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))

    def forward(self, x):
        raise RuntimeError("always")


class Surrogate(Raises):
    """Builds (its first call is right), then raises a message that execnet cannot send."""
    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls > 1:
            raise RuntimeError("a lone surrogate \\ud800 in the message")
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.gain


class Wipes(Raises):
    def forward(self, x):
        raise RuntimeError("wrong\\x1b[1A\\x1b[2K\\rgate: passed\\x1b]0;title\\x07\\x9b2J")
'''


def _run(tmp_path, layers, impl, *args):
    user_package(tmp_path, layers)
    proc = pytest_run("-q", "--contract", "rmsnorm", "--impl", f"mypkg.layers:{impl}", "--conformance-json=out.json",
                      *args, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=400)
    out = proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "out.json").read_text()) if (tmp_path / "out.json").exists() else {"results": []}
    return proc, out, {(r["check"], r.get("dtype", "")): r for r in doc["results"]}


def test_an_n_a_forged_under_the_adapters_file_name_is_the_layers_failure(tmp_path):
    proc, out, by = _run(tmp_path, FORGED_NA, "Forged", "--check", "values", "--check", "gradients")
    assert proc.returncode == 1, out[-3000:]
    for dtype in ("bfloat16", "float16", "float64"):
        rec = by[("values", dtype)]
        assert rec["outcome"] == "failed" and "does not accept" in rec["message"], rec
        assert "names no reason" in rec["message"], rec


def test_an_n_a_for_a_reason_the_layer_may_give_is_listed_and_fails_under_strict_na(tmp_path):
    proc, out, by = _run(tmp_path, FORGED_NA, "ForgedCast", "--check", "values")
    rec = by[("values", "bfloat16")]
    assert rec["outcome"] == "skipped" and rec["not_applicable"] and rec["na_source"] == "layer", rec
    assert proc.returncode == 0, out[-3000:]
    assert "n/a on the layer's own word: 3" in out and out.count("[torch-cpu-bfloat16] values") == 1, out[-3000:]
    (tmp_path / "strict").mkdir()
    proc, out, by = _run(tmp_path / "strict", FORGED_NA, "ForgedCast", "--check", "values", "--strict-na")
    assert proc.returncode == 1 and "3 n/a on the layer's own word (--strict-na)" in out, out[-3000:]


def test_blocked_by_a_check_that_passed_is_a_failure(tmp_path):
    proc, out, by = _run(tmp_path, LATER_CACHE, "Cached", "--dtype", "float32")
    assert by[("parameters", "")]["outcome"] == "passed", by[("parameters", "")]
    assert by[("values", "")]["outcome"] == "failed", by[("values", "")]
    assert "parameters passed" in by[("values", "")]["message"], by[("values", "")]
    assert not any(r["outcome"] == "blocked" for r in by.values()), out[-3000:]
    assert proc.returncode == 1, out[-3000:]


@pytest.mark.parametrize("layers,impl,check,fragment", [
    (RAISES, "Raises", "values", "RuntimeError: always"),
    (EPS_OUTSIDE, "RMSNorm", "native", "native"),
])
def test_a_narrowed_run_never_shows_blocked_by_a_check_it_did_not_run(tmp_path, layers, impl, check, fragment):
    proc, out, by = _run(tmp_path, layers, impl, "--check", check, "--dtype", "float32")
    rec = by[(check, "")]
    assert rec["outcome"] == "failed" and "was not part of this run" in rec["message"], rec
    assert fragment in rec["message"], rec
    assert proc.returncode == 1, out[-3000:]


def test_a_message_that_cannot_be_sent_is_not_blocked_by_a_check_that_passed(tmp_path):
    proc, out, by = _run(tmp_path, RAISES, "Surrogate", "--check", "parameters", "--check", "values",
                         "--dtype", "float32")
    assert by[("parameters", "")]["outcome"] == "passed"
    assert by[("values", "")]["outcome"] == "failed", by[("values", "")]
    assert proc.returncode == 1, out[-3000:]


def test_escape_sequences_from_the_layer_are_inert_in_every_output(tmp_path):
    proc, out, by = _run(tmp_path, RAISES, "Wipes", "--check", "values", "--dtype", "float32",
                         "--junitxml=junit.xml", "--conformance-html=report.html", "-rA")
    assert proc.returncode == 1, out[-3000:]
    assert "\\x1b[1A" in out, out[-3000:]
    for name, text in (("terminal", out), ("junit", (tmp_path / "junit.xml").read_text()),
                       ("html", (tmp_path / "report.html").read_text()),
                       ("json", (tmp_path / "out.json").read_text())):
        assert "\x1b[1A" not in text and "\x07" not in text and "\x9b" not in text, name


def test_a_genuine_n_a_on_the_layers_word_passes_and_an_entry_accepts_it_under_strict_na(tmp_path):
    """The README's correct torch RMSNorm takes no device= or dtype= and has no reset_parameters: construction is
    n/a on the layer's word. It passes and is listed; --strict-na fails it until an entry accepts it."""
    common = ("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--check", "construction",
              "--conformance-json=out.json")
    user_package(tmp_path, USER_LAYERS["torch"])
    run = lambda *args: pytest_run("-q", *common, *args, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=400)
    proc = run()
    rec = json.loads((tmp_path / "out.json").read_text())["results"][0]
    assert (rec["outcome"], rec["na_source"]) == ("skipped", "layer") and "device=" in rec["message"], rec
    assert proc.returncode == 0 and "n/a on the layer's own word: 1" in proc.stdout, proc.stdout[-3000:]
    proc = run("--strict-na")
    assert proc.returncode == 1 and "1 n/a on the layer's own word (--strict-na)" in proc.stdout, proc.stdout[-3000:]
    (tmp_path / "exp.yaml").write_text(
        "expectations:\n  - {contract: rmsnorm, impl: \"mypkg.layers:RMSNorm\", framework: torch, check: construction,\n"
        "     expected: n/a, reason: a plain module without factory keywords}\n")
    proc = run("--strict-na", "--expectations", "exp.yaml")
    assert proc.returncode == 0 and "accepted: " in proc.stdout, proc.stdout[-3000:]
