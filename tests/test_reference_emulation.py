"""How a numpy reference runs in a 16-bit dtype (layerside/rounding.py, in the reference executor), for the
reference-error rule (docs/contracts.md, "Tolerances from the reference's own error"): every numpy function's
result is rounded to the dtype, contractions (np.dot, np.einsum, np.tensordot) as much as ufuncs, each computed in
float32 from the rounded values; a statistic (mean, var, std) is held in the accumulation precision, as the norm
kernels hold it, float32 or the contract's wider ``accumulate``."""
import numpy as np
import pytest

from layer_conformance.dtypes import np_dtype
from layer_conformance.layerside.rounding import run_in_dtype

CONTRACTIONS = {
    "np.dot": lambda A, B: np.dot(A, B),
    "ndarray.dot": lambda A, B: A.dot(B),
    "np.einsum": lambda A, B: np.einsum("ij,jk->ik", A, B),
    "np.tensordot": lambda A, B: np.tensordot(A, B, axes=1),
    "np.inner": lambda A, B: np.inner(A, B.T),
    "matmul": lambda A, B: A @ B,
}


def _in(dtype, x):
    return np.asarray(x).astype(np_dtype(dtype)).astype(np.float64)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(CONTRACTIONS))
def test_a_contraction_accumulates_in_float32_and_is_rounded_where_the_next_operation_sees_it(dtype, name):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 64)), rng.standard_normal((64, 2))
    # the product, plus a third: the sum is rounded to the dtype only if the product was rounded before it
    result, method = run_in_dtype(lambda A, B: CONTRACTIONS[name](A, B) + 1 / 3, dtype, [a, b], {})
    assert "every numpy operation's result rounded to" in method, method
    product = _in(dtype, (_in(dtype, a).astype(np.float32) @ _in(dtype, b).astype(np.float32)).astype(np.float32))
    want = _in(dtype, (product.astype(np.float32) + np.float32(1 / 3)))
    assert np.array_equal(result, want), (name, np.abs(result - want).max())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_statistic_is_held_in_float32_not_rounded_to_the_dtype(dtype):
    # values near 30 (a bfloat16 ulp there is 0.125): x - mean(x) with the mean rounded to bfloat16 shifts every
    # centred value by up to 0.06, a tenth of their spread; the norm kernels hold the mean in float32
    x = np.linspace(29.0, 31.0, 16)[None, :]
    for fn in (lambda X: X - X.mean(-1, keepdims=True), lambda X: X - np.mean(X, axis=-1, keepdims=True)):
        result, method = run_in_dtype(fn, dtype, [x], {})
        assert "statistics (mean, var, std) held in float32" in method, method
        held = _in(dtype, x).astype(np.float32)
        want = _in(dtype, held - held.mean(-1, keepdims=True))
        assert np.array_equal(result, want), np.abs(result - want).max()
    # var and std likewise: sqrt(var) of a row of spread ~1e-3 around 30 is not the dtype's rounding of it
    for name in ("var", "std"):
        result, _ = run_in_dtype(lambda X: getattr(np, name)(X, axis=-1) * 1.0, "bfloat16", [x], {})
        want = _in("bfloat16", getattr(np, name)(_in("bfloat16", x).astype(np.float32), axis=-1))
        assert np.array_equal(result, want), name


def test_a_contract_accumulating_in_float64_holds_its_statistics_there():
    x = np.array([[1.0, 1.0 + 2 ** -9, 1.0 - 2 ** -9, 3.0]])
    _, method = run_in_dtype(lambda X: X - X.mean(-1, keepdims=True), "bfloat16", [x], {}, accumulate="float64")
    assert "float64 arithmetic and accumulation between, statistics (mean, var, std) held in float64" in method


def test_a_reshape_is_a_view_that_writes_reach():
    def fn(X):
        out = np.zeros_like(X)
        np.reshape(out, (-1,))[0] = X[0, 0] * 2
        return out
    result, _ = run_in_dtype(fn, "bfloat16", [np.array([[1.5, 2.0]])], {})
    assert result[0, 0] == 3.0


def test_a_statistic_reads_its_operand_before_rounding_and_what_follows_from_it_stays_in_float32():
    # float16: 300 ** 2 overflows and 1e-3 ** 2 is a subnormal with a 6% rounding; a kernel squares inside the sum
    x = np.array([[300.0, 300.0], [1e-3, 1e-3]])
    result, _ = run_in_dtype(lambda X: (X ** 2).mean(-1) / 1e4, "float16", [x], {})
    want = _in("float16", (_in("float16", x).astype(np.float32) ** 2).mean(-1) / np.float32(1e4))
    assert np.array_equal(result, want), (result, want)
    # 1 / sqrt(m2 + eps) with m2 ~ eps ~ 1e-6 (below float16's normal range): computed in float32, then x * r rounded
    result, _ = run_in_dtype(lambda X: X / np.sqrt((X ** 2).mean(-1, keepdims=True) + 1e-6), "float16", [x[1:]], {})
    held = _in("float16", x[1:]).astype(np.float32)
    want = _in("float16", held / np.sqrt((held ** 2).mean(-1, keepdims=True) + np.float32(1e-6)))
    assert np.array_equal(result, want), (result, want)
