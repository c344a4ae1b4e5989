"""The contract's reference, checked against itself before any layer is judged.

Every check compares a layer with the reference, so a reference that disagrees with itself (a ``vjp`` that
forgot a factor) would fail every correct layer. A run therefore loads its contracts with ``load_checked``:
``load_contract`` with the reference's names (imported in the reference executor) for the rules that ask for
them, then this self-check once the contract's own rules pass; what it finds is the loader's (line, field,
message) triples: a contract error (exit 3), every problem at once, never a layer failure. On every case, in
float64, at the test state:

- ``forward`` returns an array;
- ``vjp`` (true and surrogate gradients) returns, for a random cotangent, a float64 gradient of the right
  shape for each input and trainable slot the contract differentiates;
- a true gradient (unless ``gradients.finite_difference: false``) agrees with a central finite difference of
  ``forward`` along one random direction per input and slot. A surrogate gradient is declared, not derived:
  it is exempt;
- ``second_order.reference`` (a Hessian-vector product) agrees with finite differences of ``vjp``;
- each declared ``properties`` entry holds for ``forward`` at the initial state, by its kind's one
  implementation (``checks/properties.py``).

The reference is code too: it runs only in the reference executor, under the contract's time limit. Its
answer depends on the contract's bytes alone, so it is worked out once per contract content per process.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from . import inputs as inputs_mod
from .contract import Contract, ContractError, load_contract
from .dtypes import is_floating
from .reference_run import reference

STEP = 1e-6            # float64 central difference along a unit-variance direction
RTOL, ATOL = 1e-6, 1e-7  # of the directional derivative, beyond the rounding bound of the difference
LOCATE_UP_TO = 1024      # elements of an input whose disagreeing element is looked for one by one

_checked: dict[str, list] = {}  # sha256 of the contract file -> its problems


def load_checked(path, max_input_elements: int | None = None, budget=None, raw: bytes | None = None,
                 pythons: dict | None = None) -> Contract:
    """The contract at ``path`` as a run uses it: loaded (``load_contract``, the reference's names looked up in the
    reference executor), then its reference checked against itself. Every problem is a ``ContractError``.
    ``pythons``: --executor-python, where a reference implementation's framework lives in another environment."""
    contract = load_contract(path, max_input_elements, budget, raw=raw, reference_names=reference_names)
    # the rules' problems first, all at once; the reference is run against itself only on a contract that passed
    problems = [contract.problem(at, message) for at, message in reference_problems(contract, pythons)]
    if problems:
        raise ContractError(path, problems)
    return contract


def reference_names(module: str, timeout: float | None) -> tuple[list[str], str | None]:
    """The callables ``module`` defines, or why it cannot be imported, from the reference executor; its import gets
    ``timeout`` seconds (None: the checks' default). What the loader's rules ask of the reference."""
    from .boundary.session import reference_names as names_in_executor
    from .runner import DEFAULT_TIMEOUT
    return names_in_executor(module, DEFAULT_TIMEOUT if timeout is None else timeout)


def reference_problems(contract, pythons: dict | None = None) -> list:
    """Every way the reference disagrees with itself, as (field path, message); once per file content
    (``contract.digest``) per process."""
    key = contract.digest
    if key not in _checked and contract.reference.impl:
        _checked[key] = impl_problems(contract, pythons)
    if key not in _checked:
        from .boundary.session import reference_deadline
        from .runner import DEFAULT_TIMEOUT
        with reference_deadline(float(contract.timeout or DEFAULT_TIMEOUT)):
            _checked[key] = _SelfCheck(contract).run()
    return list(_checked[key])


def impl_problems(contract, pythons: dict | None = None) -> list:
    """A ``reference: {impl, framework}``, imported in a throwaway executor (of the framework's --executor-python,
    where one is given): its framework installed, the module and attribute there, of the framework it names. Its
    values and gradients are the framework's own (trusted, not checked against finite differences); its state map
    is matched when the checks build it."""
    from .boundary import RemoteError
    from .boundary.session import detect
    from .frameworks import installed
    ref = contract.reference
    python = (pythons or {}).get(ref.framework)
    if python is None and not installed(ref.framework):
        return [(("reference", "framework"), f"the reference {ref.impl} is a {ref.framework} implementation, and "
                                              f"{ref.framework} is not installed here (give its environment with "
                                              f"--executor-python {ref.framework}=PYTHON)")]
    try:
        found = detect(ref.impl, python)
    except RemoteError as exc:
        return [(("reference", "impl"), f"cannot import {ref.impl}: {exc.remote_text}")]
    except Exception as exc:   # the import ended or hung its process
        return [(("reference", "impl"), f"cannot import {ref.impl}: {exc}")]
    if found.get("framework") not in (None, ref.framework):
        return [(("reference", "framework"), f"{ref.impl} is a {found['framework']} implementation, not "
                                              f"{ref.framework}")]
    return []


def _float64(a):
    return np.asarray(a, dtype=np.float64) if is_floating(np.asarray(a).dtype) else a


class _Raised(Exception):
    """A reference call that raised, timed out or ended its executor: said once, at the function's field."""

    def __init__(self, at: tuple, message: str):
        super().__init__(message)
        self.at = at


class _SelfCheck:
    def __init__(self, contract):
        self.contract = contract
        self.problems: list = []
        self.kw: dict = {}

    def bad(self, at, message):
        # (field path, message): the loader (layer_conformance.contract) turns them into file:line:field problems
        self.problems.append((at, message))

    def call(self, fn, what, *args, **kw):
        """``fn(*args, **kw)`` in the reference executor; ``what`` names it (forward, vjp, the hvp's name...)."""
        from .boundary import CheckTimeout, ExecutorLost, RemoteError
        hvp = self.contract.second_order.reference if self.contract.second_order else None
        at = {"forward": ("reference", "forward"), "vjp": ("reference", "vjp")}.get(
            what, ("second_order", "reference") if what == hvp else ("reference", "module"))
        try:
            return fn(*args, **kw)
        except RemoteError as exc:
            raise _Raised(at, f"{what} raised {exc.remote_text}") from None
        except CheckTimeout:
            raise _Raised(at, f"{what} did not finish within the contract's time limit") from None
        except ExecutorLost as exc:
            raise _Raised(at, f"{what} ended the reference executor: {exc}") from None

    def run(self) -> list:
        contract = self.contract
        try:
            _, self.forward, self.vjp = self.call(reference, "import", contract)
            state = self.call(inputs_mod.test_state, "init_* (making its test state)", contract)
        except _Raised as exc:
            self.bad(exc.at, f"the reference's {exc}")
            return self.problems
        self.kw = {**contract.constructor, **{k: _float64(v) for k, v in state.items()}}
        self.mode = contract.gradients.mode
        self.differences = contract.gradients.finite_difference
        second = contract.second_order
        hvp = second.reference if second else None
        hvp_cases = (second.cases if second else None) or [c.name for c in contract.cases]
        for k, case in enumerate(contract.cases):
            x = [_float64(a) for a in inputs_mod.case_inputs(contract, case, 0).values()]
            rng = inputs_mod.rng_for(0, contract.name, case.name, "reference self-check")
            before = len(self.problems)
            try:
                out = self.case(case, x, rng)
                if hvp and out is not None and self.vjp is not None and self.differences \
                        and case.name in hvp_cases and len(self.problems) == before:
                    self.second_order(case, x, hvp, out, rng)
            except _Raised as exc:
                self.bad(exc.at, f"case {case.name!r}: the reference's {exc}")
            except Exception as exc:  # an answer of a kind no reference gives (the module is code under review)
                self.bad(("reference",), f"case {case.name!r}: the reference's answers cannot be checked: "
                                         f"{type(exc).__name__}: {exc}")
        self.properties()
        return self.problems

    # -- one case: forward, vjp, finite differences ------------------------------------------------
    def case(self, case, x, rng):
        """The reference's output for ``case`` (None where it has none to go on from)."""
        name = repr(case.name)
        out = self.call(self.forward, "forward", *x, **self.kw)
        if not isinstance(out, np.ndarray) and not np.isscalar(out):
            self.bad(("reference", "forward"), f"case {name}: the reference forward returned a "
                                               f"{type(out).__name__}, not an array")
            return None
        out = np.asarray(out)
        if self.mode == "none" or self.vjp is None:
            return out
        names, idx, slots = self.contract.differentiated(case)
        wanted = {names[i]: i for i in idx} | {s: None for s in slots}
        g = rng.standard_normal(out.shape)
        got = self.call(self.vjp, "vjp", g, *x, **self.kw)
        if not isinstance(got, dict):
            self.bad(("reference", "vjp"), f"case {name}: the reference vjp returned a {type(got).__name__}, "
                                           f"not a dict of gradients by name")
            return out
        missing = [n for n in wanted if n not in got]
        if missing:
            self.bad(("reference", "vjp"), f"case {name}: the reference vjp returns no gradient for "
                                           f"{', '.join(map(repr, missing))} (it returns {sorted(got) or 'nothing'}), "
                                           f"which the contract differentiates")
        usable = {}
        for n, i in wanted.items():
            if n not in got:
                continue
            like = x[i] if i is not None else self.kw[n]
            grad = np.asarray(got[n])
            if grad.shape != np.shape(like):
                self.bad(("reference", "vjp"), f"case {name}: the reference vjp's gradient for {n!r} has "
                                               f"shape {list(grad.shape)}, expected {list(np.shape(like))}")
            elif grad.dtype != np.float64:
                self.bad(("reference", "vjp"), f"case {name}: the reference vjp's gradient for {n!r} is "
                                               f"{grad.dtype}, given float64 inputs and state: a gradient is "
                                               f"an array of the input's floating dtype")
            else:
                usable[n] = (i, grad)
        if self.mode == "true" and self.differences:
            for n, (i, grad) in usable.items():
                self.difference(case, x, g, n, i, grad, rng)
        return out

    def _shifted(self, x, n, i, delta):
        """(inputs, keyword arguments) with input ``i`` (or slot ``n`` where ``i`` is None) moved by ``delta``."""
        if i is not None:
            return [a + delta if j == i else a for j, a in enumerate(x)], self.kw
        return x, {**self.kw, n: self.kw[n] + delta}

    def central(self, x, g, n, i, direction, step):
        """(<g, (f(x + h u) - f(x - h u)) / 2h>, the bound of its rounding error) for input ``i`` or slot ``n``."""
        sides = []
        for sign in (1, -1):
            args, kw = self._shifted(x, n, i, sign * step * direction)
            sides.append(np.asarray(self.call(self.forward, "forward", *args, **kw), dtype=np.float64))
        # positions held at +-inf (a mask) carry no derivative
        finite = np.isfinite(sides[0]) & np.isfinite(sides[1])
        plus, minus = (np.where(finite, s, 0.0) for s in sides)
        numeric = float(np.sum((plus - minus) * g)) / (2 * step)
        rounding = float(np.finfo(np.float64).eps * np.sum(np.abs(g) * (np.abs(plus) + np.abs(minus)))) / (2 * step)
        return numeric, rounding

    def difference(self, case, x, g, n, i, grad, rng):
        """<vjp(g), u> against <g, (f(x + h u) - f(x - h u)) / 2h> along one random direction u."""
        u = rng.standard_normal(grad.shape)
        analytic = float(np.sum(grad * u))
        allowed = RTOL * float(np.sum(np.abs(grad * u))) + ATOL
        numeric, rounding = self.central(x, g, n, i, u, STEP)
        if abs(analytic - numeric) <= 4 * rounding + RTOL * abs(numeric) + allowed:
            return
        # strong curvature (a row whose scale is near eps): the step's own error, measured from a second
        # step, D(2h) - D(h) ~ 3 c h^2, and the extrapolated difference (4 D(h) - D(2h)) / 3
        numeric2, rounding2 = self.central(x, g, n, i, u, 2 * STEP)
        truncation = abs(numeric2 - numeric) / 3 + rounding2
        numeric = (4 * numeric - numeric2) / 3
        if abs(analytic - numeric) <= 4 * (rounding + truncation) + RTOL * abs(numeric) + allowed:
            return
        what = f"input {n!r}" if i is not None else f"trainable slot {n!r}"
        self.bad(("reference", "vjp"), f"case {case.name!r}: the gradient for {what} disagrees with finite "
                                       f"differences of forward (float64): along a random direction "
                                       f"{_gap('vjp', analytic, numeric)}{self.locate(x, g, n, i, grad)}")

    def locate(self, x, g, n, i, grad) -> str:
        """The element whose gradient is farthest from its own central difference, where the input is small
        enough to difference element by element (a failing contract only)."""
        if grad.size > LOCATE_UP_TO:
            return ""
        numeric = np.empty(grad.shape)
        for k in np.ndindex(grad.shape):
            e = np.zeros(grad.shape)
            e[k] = 1.0
            numeric[k], _ = self.central(x, g, n, i, e, STEP)
        k = np.unravel_index(int(np.argmax(np.abs(grad - numeric))), grad.shape)
        return f"; worst element {n}{list(map(int, k))}: vjp {grad[k]:.6g}, central difference {numeric[k]:.6g}"

    def second_order(self, case, x, hvp_name, out, rng):
        """hvp(g, v) against the finite difference of <vjp(g, x), v> along one random direction per input."""
        mod, _, _ = reference(self.contract)
        names, idx, _ = self.contract.differentiated(case)
        if not idx:
            return
        g = rng.standard_normal(out.shape)
        v = {names[i]: rng.standard_normal(x[i].shape) for i in idx}
        want = self.call(getattr(mod, hvp_name), hvp_name, g, v, *x, **self.kw)
        for i in idx:
            n = names[i]
            if not isinstance(want, dict) or n not in want or np.shape(want[n]) != x[i].shape:
                self.bad(("second_order", "reference"), f"case {case.name!r}: {hvp_name} returns no "
                         f"{list(x[i].shape)} array for input {n!r} (a dict of one per differentiated input)")
                continue
            got = np.asarray(want[n], dtype=np.float64)
            u = rng.standard_normal(x[i].shape)
            sides = []
            for sign in (1, -1):
                args, kw = self._shifted(x, n, i, sign * STEP * u)
                grads = self.call(self.vjp, "vjp", g, *args, **kw)
                sides.append(sum(float(np.sum(np.asarray(grads[m], dtype=np.float64) * v[m])) for m in v))
            analytic, numeric = float(np.sum(got * u)), (sides[0] - sides[1]) / (2 * STEP)
            rounding = float(np.finfo(np.float64).eps * (abs(sides[0]) + abs(sides[1]))) / (2 * STEP)
            if abs(analytic - numeric) <= 4 * rounding + RTOL * max(float(np.sum(np.abs(got * u))), abs(numeric)) \
                    + ATOL:
                continue
            self.bad(("second_order", "reference"), f"case {case.name!r}: {hvp_name}'s product for input {n!r} "
                     f"disagrees with finite differences of vjp (float64): along a random direction "
                     f"{_gap(hvp_name, analytic, numeric)}")

    # -- properties --------------------------------------------------------------------------------
    def properties(self):
        from .checks.properties import KINDS
        if not self.contract.properties or self.contract.kind == "function":
            return  # the properties check states them for layers only
        try:
            state = self.call(inputs_mod.initial_state, "init_* (making its initial state)", self.contract)
        except _Raised as exc:
            self.bad(exc.at, f"the reference's {exc}")
            return
        as_layer = _ReferenceAsLayer(self, {k: _float64(v) for k, v in state.items()})
        for i, prop in enumerate(self.contract.properties):
            # after_dense puts a framework's dense layer first: the reference alone is what is checked here
            prop = dataclasses.replace(prop, after_dense=None)
            try:
                _, problem = KINDS[prop.kind](as_layer, prop, i)
            except _Raised as exc:
                problem = f"the reference's {exc}"
            except Exception as exc:  # an output of a kind no forward gives
                problem = f"its output cannot be checked: {type(exc).__name__}: {exc}"
            if problem:
                self.bad(("properties", i), f"the reference forward (float64, initial state) does not "
                                            f"have it: {problem}")


class _ReferenceAsLayer:
    """What a property kind asks of a check's context, answered by the reference forward at ``state`` in
    float64, so that each kind stays written once (``checks/properties.py``)."""
    is_function = False
    seed = 0

    def __init__(self, check: _SelfCheck, state: dict):
        self.check, self.contract = check, check.contract
        self.kw = {**check.contract.constructor, **state}

    def new_layer(self):
        return None

    def run(self, layer, inputs, training=False):
        return np.asarray(self.check.call(self.check.forward, "forward", *map(_float64, inputs), **self.kw))

    def output_numpy(self, out, what="output"):
        return out

    def tolerance(self, check, dtype):
        from .tolerances import tolerance
        return tolerance(self.contract, check, dtype)


def _gap(rule: str, analytic: float, numeric: float) -> str:
    gap, scale = abs(analytic - numeric), max(abs(analytic), abs(numeric))
    return f"{rule} gives {analytic:.6g}, the central difference {numeric:.6g}: off by {gap:.3g} ({gap / scale:.1%})"
