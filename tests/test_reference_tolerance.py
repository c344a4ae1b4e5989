"""Tolerances from the computation itself: where a contract states no tolerance, a dtype below float64 is judged
against the reference's own error in that dtype (``tolerances.reference_error_factor``, default 2), the table's
bound the floor. A matmul chain written as users write it passes float32 gradients on inputs at scale 10 and
bfloat16 values; a layer that computes a float32 run in bfloat16 fails, told both errors."""
import json

import numpy as np
import pytest

from layer_conformance.compare import OwnError, describe_mismatch
from layer_conformance.contract import ContractError, load_contract
from layer_conformance.frameworks import installed
from tests.support import ROOT, pytest_run, user_package

# the user's numpy reference is the bundled swiglu's (the same computation, weights [in, out])
REFERENCE = "from layer_conformance.reference_impls.numpy.swiglu import forward, vjp\n"

LAYERS = '''
import torch
import torch.nn.functional as F
from torch import nn


class FeedForward(nn.Module):
    """silu(x @ w1) * (x @ w3) @ w2, the weights [in, out], drawn as nn.Linear's are."""
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(d, hidden) / d ** 0.5)
        self.w3 = nn.Parameter(torch.randn(d, hidden) / d ** 0.5)
        self.w2 = nn.Parameter(torch.randn(hidden, d) / hidden ** 0.5)

    def forward(self, x):
        return (F.silu(x @ self.w1) * (x @ self.w3)) @ self.w2


class FeedForwardInBfloat16(FeedForward):
    """Computes in bfloat16 whatever its inputs' dtype (an autocast left on), and casts back."""
    def forward(self, x):
        low = lambda t: t.to(torch.bfloat16)
        return ((F.silu(low(x) @ low(self.w1)) * (low(x) @ low(self.w3))) @ low(self.w2)).to(x.dtype)
'''

CONTRACT = '''name: feed_forward
kind: layer
constructor: {d: 8, hidden: 16}
dtypes: [float32, bfloat16]
cases:
  - name: random
    inputs:
      X: {shape: [16, d], dtype: float32}
  - name: scale10
    inputs:
      X: {shape: [16, d], dtype: float32, draw: normal, scale: 10.0}
state:
  trainable:
    w1: {shape: [d, hidden], dtype: float32, init: {random: {mean: 0.0}}}
    w3: {shape: [d, hidden], dtype: float32, init: {random: {mean: 0.0}}}
    w2: {shape: [hidden, d], dtype: float32, init: {random: {mean: 0.0}}}
reference: {module: mypkg.ref}
gradients:
  mode: "true"
  wrt: [X, w1, w3, w2]
'''

torch_only = pytest.mark.skipif(not installed("torch"), reason="torch is not installed")


def _run(tmp_path, impl, checks=("values", "gradients")):
    if not (tmp_path / "mypkg").exists():
        user_package(tmp_path, LAYERS)
        (tmp_path / "mypkg" / "ref.py").write_text(REFERENCE)
        (tmp_path / "feed_forward.yaml").write_text(CONTRACT)
    out = tmp_path / f"{impl}.json"
    proc = pytest_run("-q", "--contract", str(tmp_path / "feed_forward.yaml"), "--impl", f"mypkg.layers:{impl}",
                      "--framework", "torch", *[a for c in checks for a in ("--check", c)],
                      f"--conformance-json={out}", cwd=tmp_path, env={"PYTHONPATH": str(ROOT)}, timeout=600)
    records = json.loads(out.read_text())["results"]
    return proc, {(r["check"], r.get("dtype") or "float32"): r for r in records}


def _notes(record) -> str:
    details = record.get("details") or {}
    return " ".join(details.get("notes") or [])


@torch_only
def test_a_correct_matmul_chain_passes_where_the_table_alone_fails_it(tmp_path):
    proc, records = _run(tmp_path, "FeedForward")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert {k: r["outcome"] for k, r in records.items()} == {
        ("values", "float32"): "passed", ("gradients", "float32"): "passed",
        ("values", "bfloat16"): "passed", ("gradients", "bfloat16"): "passed"}, proc.stdout[-4000:]
    # the table's bound alone fails both (a few float32 ulps over a cancelling sum; bfloat16's rounded hidden
    # layer): each passes by the rule, and the record says so, with both errors and how the reference ran
    grads = _notes(records[("gradients", "float32")])
    assert "case 'scale10'" in grads and "within 2x the reference's own float32 error" in grads, grads
    assert "method: reference computed in float32" in grads, grads
    values = _notes(records[("values", "bfloat16")])
    assert "within 2x the reference's own bfloat16 error" in values, values
    assert "method: reference emulated in bfloat16: inputs, state and every numpy operation's result" in values


@torch_only
def test_a_layer_computing_in_bfloat16_fails_float32_told_both_errors(tmp_path):
    proc, records = _run(tmp_path, "FeedForwardInBfloat16")
    assert proc.returncode == 1, proc.stdout[-4000:]
    values = records[("values", "float32")]
    assert values["outcome"] == "failed", proc.stdout[-4000:]
    message = values["message"]
    assert "allowed rtol=1.3e-06, atol=1e-05; max error " in message, message
    assert "x the reference's own float32 error " in message, message
    assert "(allowed 2x, method: reference computed in float32)" in message, message
    ratio = float(message.split("x the reference's own float32 error")[0].rsplit(" is ", 1)[1])
    assert ratio > 100, message
    assert records[("gradients", "float32")]["outcome"] == "blocked", proc.stdout[-4000:]
    # gradients alone: every gradient compared, each failure with both errors
    proc, records = _run(tmp_path, "FeedForwardInBfloat16", checks=("gradients",))
    grads = records[("gradients", "float32")]
    assert grads["outcome"] == "failed", proc.stdout[-4000:]
    for name in ("input 'X'", "slot 'w1'", "slot 'w3'", "slot 'w2'"):
        assert f"gradient for {name} (case 'scale10')" in grads["message"], grads["message"]
    assert grads["message"].count("x the reference's own float32 error ") >= 8, grads["message"]


def test_the_rule_allows_k_times_the_references_own_error_and_no_more():
    expected = np.array([1.0, -2.0, 0.5])
    got = (expected + np.array([3e-5, 0.0, 0.0])).astype(np.float32)
    assert describe_mismatch(got, expected, 1.3e-6, 1e-5) is not None
    own = OwnError(2, "float32", 2e-5, "reference computed in float32")
    assert describe_mismatch(got, expected, 1.3e-6, 1e-5, own=own) is None
    tight = OwnError(2, "float32", 1e-5, "reference computed in float32")
    said = describe_mismatch(got, expected, 1.3e-6, 1e-5, own=tight)
    assert "max error 3e-05 is 3x the reference's own float32 error 1e-05 (allowed 2x, method: " in said, said
    # an exact or non-finite run of the reference allows nothing beyond the table, nor one that lost the result
    # (an error over 1/8 of the output's scale: an overflow in the low dtype, a sum cancelled to nothing)
    for error, words in ((0.0, "is exact here"), (float("inf"), "is not finite"),
                         (0.3, "errs by 0.3, over 0.125 of the output's scale 2: it lost the result in float32")):
        said = describe_mismatch(got, expected, 1.3e-6, 1e-5, own=OwnError(2, "float32", error, "m", scale=2.0))
        assert said is not None and words in said, said


@pytest.mark.parametrize("value,fragment", [
    ("-1", "less than the minimum of 0"),
    (".inf", "is not a finite number"),
    ("two", "is not of type 'number'"),
])
def test_a_bad_factor_is_a_contract_error_at_its_field(tmp_path, value, fragment):
    path = tmp_path / "feed_forward.yaml"
    path.write_text(CONTRACT + f"tolerances:\n  reference_error_factor: {value}\n")
    with pytest.raises(ContractError) as info:
        load_contract(path)
    line = CONTRACT.count("\n") + 2
    assert f"{path}:{line}: tolerances.reference_error_factor: " in str(info.value), str(info.value)
    assert fragment in str(info.value), str(info.value)


def test_the_factor_reads_as_stated_and_defaults_to_two(tmp_path):
    from layer_conformance.tolerances import reference_error_factor
    path = tmp_path / "feed_forward.yaml"
    path.write_text(CONTRACT)
    contract = load_contract(path)
    assert reference_error_factor(contract, "values", "bfloat16") == 2.0
    assert reference_error_factor(contract, "values", "float64") is None      # float64 is the reference's own
    assert reference_error_factor(contract, "native", "float32") is None      # values and gradients only
    path.write_text(CONTRACT + "tolerances:\n  reference_error_factor: 4\n"
                               "  checks: {gradients: {float32: {rtol: 1.0e-4, atol: 1.0e-4}}}\n")
    contract = load_contract(path)
    assert reference_error_factor(contract, "values", "float32") == 4.0
    assert reference_error_factor(contract, "gradients", "float32") is None   # a stated tolerance keeps its own
    path.write_text(CONTRACT + "tolerances: {reference_error_factor: 0}\n")
    assert reference_error_factor(load_contract(path), "values", "float32") is None   # the tables alone


def test_a_gradient_a_few_ulps_off_everywhere_is_not_told_it_is_scaled():
    # a cancelling sum that fails the table by rounding is off by a ratio of 1.000003 on every element: no
    # "scaled by 1x" hint (the hint is right or absent); a real factor keeps it
    from layer_conformance.checks.numerics import _pattern_hint
    expected = np.linspace(1.0, 30.0, 64)
    assert _pattern_hint(None, expected * (1 + 3e-6), expected) == ""
    assert "2" in _pattern_hint(None, expected * 2, expected)


# --- how the reference runs in a dtype (layerside/rounding.py, in the reference executor) ---------------------------

def test_float32_runs_natively_and_a_promoting_reference_is_emulated():
    from layer_conformance.layerside.rounding import run_in_dtype
    x = np.random.default_rng(0).standard_normal((4, 64))
    result, method = run_in_dtype(lambda X: X @ X.T, "float32", [x], {})
    assert method == "reference computed in float32"
    error = np.abs(result - x.astype(np.float32).astype(np.float64) @ x.astype(np.float32).astype(np.float64).T)
    assert 0 < error.max() < 1e-4   # float32 arithmetic's rounding, not float64's
    # a float64 constant promotes float32 in numpy: each result rounded to float32, float64 arithmetic between
    result, method = run_in_dtype(lambda X: np.sqrt(np.float64(2.0)) * X, "float32", [x], {})
    assert method.startswith("reference emulated in float32: inputs, state and every numpy operation's result")
    assert np.array_equal(result, (np.sqrt(2.0) * x.astype(np.float32).astype(np.float64)).astype(np.float32))
    result, method = run_in_dtype(lambda X: np.asarray(X, dtype=np.float64) * 3, "bfloat16", [x], {})
    assert method.endswith("the reference converts them, so its output alone is rounded")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bits_round_every_operation_and_reduce_as_a_framework_does(dtype):
    from layer_conformance.dtypes import np_dtype
    from layer_conformance.layerside.rounding import run_in_dtype
    x = np.full((2, 4096), 10.0)
    x[1] = 0.1
    # a mean of 4096 squares: accumulated in float32 and rounded once (ml_dtypes' bfloat16 sum stalls at 32 terms'
    # worth, numpy's float16 sum overflows past 65504 before dividing)
    result, method = run_in_dtype(lambda X: (X ** 2).mean(-1), dtype, [x], {})
    assert "every numpy operation's result rounded to" in method, method
    want = [(np.float32(np.asarray(v).astype(np_dtype(dtype))) ** 2) for v in (10.0, 0.1)]
    assert np.allclose(result, want, rtol=1e-2), result
    # every intermediate is rounded: (x + 1/3) - x is not 1/3
    result, _ = run_in_dtype(lambda X: (X + 1 / 3) - X, dtype, [np.array([10.0])], {})
    assert result[0] != float(np.asarray(1 / 3).astype(np_dtype(dtype)))
