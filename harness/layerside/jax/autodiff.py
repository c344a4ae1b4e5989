"""JAX (Flax NNX): gradients: vjp, jvp, hvp and whether a custom rule is recorded.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...protocol.autodiff import AutodiffProtocol, SecondOrder, Tangents
from .core import _compiled, _gradients, _wants_x64, _x64


class _NotAnArray(Exception):
    """vjp's function returned something else (the name of its type)."""


class JaxAutodiff(AutodiffProtocol):
    @staticmethod
    def _one_program(whole, values):
        """``whole(*values)`` compiled as one program, or run eagerly where it cannot be traced."""
        done = _compiled(whole, values)
        return done[0] if done else whole(*values)

    def custom_rule_recorded(self, fn, inputs, wrt):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            program = str(jax.make_jaxpr(lambda *xs: fn(*xs))(*args))
        return "custom_vjp_call" in program or "custom_jvp_call" in program  # nested programs printed too

    def vjp(self, fn, layer, inputs, wrt, cotangent):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)

            def whole(xs, others, ps, rest, ct):
                out, pullback = jax.vjp(lambda xs, ps: pure(xs, others, ps, rest), xs, ps)
                if not isinstance(out, jax.Array):
                    raise _NotAnArray(type(out).__name__)
                return (out, *pullback(jnp.asarray(ct, dtype=out.dtype)))
            try:
                out, x_grads, p_grads = self._one_program(
                    whole, ([args[i] for i in wrt], args, params, rest, np.asarray(cotangent)))
            except _NotAnArray as exc:  # raised here, so that the message points at vjp as it always has
                raise TypeError(f"the output is a {exc}, not a jax.Array") from None
        return _gradients(self, layer, out, len(inputs), wrt, x_grads, p_grads)

    def jvp(self, fn, layer, inputs, tangents):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pushed = [i for i, t in enumerate(tangents) if t is not None]
            pure, params, rest = self._pure(fn, layer, pushed)

            def whole(xs, others, ps, rest, ts):
                return jax.jvp(lambda *xs: pure(xs, others, ps, rest), xs, ts)
            out, tangent = self._one_program(whole, ([args[i] for i in pushed], args, params, rest,
                                                     [jnp.asarray(np.asarray(tangents[i]), dtype=args[i].dtype)
                                                      for i in pushed]))
        return Tangents(output=out, tangent=tangent)

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)
            dirs = [jnp.asarray(np.asarray(directions[i]), dtype=args[i].dtype) for i in wrt]

            def whole(xs, others, ps, rest, ct, dirs):
                def gradient_dot(xs):
                    # jax.grad of this traces the first-order pullback, custom bwd rule included
                    out, pullback = jax.vjp(lambda xs: pure(xs, others, ps, rest), xs)
                    (grads,) = pullback(jnp.asarray(ct, dtype=out.dtype))
                    return sum(jnp.vdot(g, d) for g, d in zip(grads, dirs))
                return jax.grad(gradient_dot)(xs)
            second = self._one_program(whole, ([args[i] for i in wrt], args, params, rest,
                                               np.asarray(cotangent), dirs))
        by_index = dict(zip(wrt, second))
        return SecondOrder(inputs=tuple(by_index.get(i) for i in range(len(inputs))))
