"""JAX (Flax NNX): the vectorising transform (``vmap``).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ...protocol.batching import BatchingProtocol, VmapGrads
from .core import _wants_x64, _x64


class JaxBatching(BatchingProtocol):
    # -- the vectorising transform (the batching check) ---------------------------------------
    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]
            if not isinstance(layer, nnx.Module):
                return jax.vmap(lambda *xs: fn(*xs), in_axes=tuple(in_axes), out_axes=axis)(*args)
            layer.eval()
            # nnx.vmap on the layer itself, as a user vectorises a Module: its state shared by every example,
            # and what the call writes to the layer lands on it (so a second call sees it)
            return nnx.vmap(lambda model, *xs: model(*xs), in_axes=(None, *in_axes), out_axes=axis)(layer, *args)

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        with _x64(_wants_x64(*inputs)):
            args = [a if isinstance(a, jax.Array) else self.tensor(a) for a in inputs]

            def of_wrt(xs, base):
                full = list(base)
                for i, x in zip(wrt, xs):
                    full[i] = x
                return full

            def whole(args, ct):
                vectorised = jax.vmap(lambda *xs: fn(*xs), in_axes=tuple(in_axes), out_axes=axis)
                out, pull = jax.vjp(lambda *xs: vectorised(*of_wrt(xs, args)), *[args[i] for i in wrt])
                grad_of_vmap = pull(jnp.asarray(ct, dtype=out.dtype))

                def one(example, c):
                    o, pull = jax.vjp(lambda *xs: fn(*of_wrt(xs, example)), *[example[i] for i in wrt])
                    return pull(jnp.asarray(c, dtype=o.dtype))
                vmap_of_grad = jax.vmap(one, in_axes=(list(in_axes), axis), out_axes=axis)(args, ct)
                return grad_of_vmap, vmap_of_grad
            # eager: an argument JAX holds static (nondiff_argnums) cannot be a jit tracer
            grad_of_vmap, vmap_of_grad = whole(args, self.tensor(cotangent))
        a, b = dict(zip(wrt, grad_of_vmap)), dict(zip(wrt, vmap_of_grad))
        return VmapGrads(grad_of_vmap=tuple(a.get(i) for i in range(len(inputs))),
                         vmap_of_grad=tuple(b.get(i) for i in range(len(inputs))))
