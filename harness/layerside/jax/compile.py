"""JAX (Flax NNX): the framework's compiler (the ``compiled`` check) and the eager path it is compared with.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ...protocol.compile import CompileProtocol, CompileStats
from .core import _Compiled, _gradients, _wants_x64, _x64


class JaxCompile(CompileProtocol):
    retraces_per_shape = True

    def compilation_cache(self, directory):
        # JAX's persistent cache, keyed by the program (its StableHLO), the compile options and the jaxlib:
        # the same key is the same executable. Every program is kept, however quick: a fresh process would
        # otherwise compile each of them again. JAX opens its cache once; reset_cache makes the next
        # compilation open this directory.
        from jax.experimental.compilation_cache import compilation_cache as cache
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        cache.set_cache_dir(directory)
        cache.reset_cache()

    # -- the compiler --------------------------------------------------------------------------
    def compilers(self, backend=None):
        return ["jax.jit"]

    def compile(self, fn, layer, compiler):
        return _Compiled(self, fn, layer)

    def compiled_call(self, compiled, inputs, training=False):
        with _x64(_wants_x64(*inputs)):
            return compiled.call([self.tensor(a) for a in inputs], training)

    def compiled_vjp(self, compiled, layer, inputs, wrt, cotangent):
        with _x64(_wants_x64(*inputs)):
            # the cotangent placed as the inputs are: the lowered program is then the adapter's own vjp's, which
            # the target's compilation cache already holds (the traces, which the check counts, are its own)
            return compiled.vjp([self.tensor(a) for a in inputs], wrt, self.tensor(cotangent))

    def compile_stats(self, compiled) -> CompileStats:
        return CompileStats(traces=compiled.traces, graphs=compiled.traces)

    def eager_call(self, fn, inputs, training=False, op_by_op=True):
        # op by op compiles every primitive for every new shape (about 1.4 s for an RMSNorm's forward and
        # backward); the adapter's own call traces the Python on every call and compiles the program it
        # traced (reused only when identical), which is eager execution's semantics at a program's cost
        if not op_by_op:
            return self.call(fn, inputs, training=training)
        with jax.disable_jit(), _x64(_wants_x64(*inputs)):
            args = [self.tensor(a) for a in inputs]
            if isinstance(fn, nnx.Module):
                fn.train() if training else fn.eval()
            return fn(*args)

    def eager_vjp(self, fn, layer, inputs, wrt, cotangent, op_by_op=True):
        if not op_by_op:
            got = self.vjp(fn, layer, inputs, wrt, cotangent)
            if isinstance(layer, nnx.Module):  # the layer's own call, as below
                got = dataclasses.replace(got, output=self.call(fn, inputs))
            return got
        with jax.disable_jit(), _x64(_wants_x64(*inputs)):
            args = [self.tensor(a) for a in inputs]
            pure, params, rest = self._pure(fn, layer, wrt)
            out, pullback = jax.vjp(lambda xs, ps: pure(xs, args, ps, rest), [args[i] for i in wrt], params)
            if not isinstance(out, jax.Array):
                raise TypeError(f"the output is a {type(out).__name__}, not a jax.Array")
            x_grads, p_grads = pullback(jnp.asarray(np.asarray(cotangent), dtype=out.dtype))
            if isinstance(layer, nnx.Module):
                # the pullback ran on a merged copy; the output is the layer's own call, so that what the
                # layer does to itself in Python (a counter, a cache) happens as it does eagerly
                layer.eval()
                out = fn(*args)
        return _gradients(self, layer, out, len(inputs), wrt, x_grads, p_grads)
