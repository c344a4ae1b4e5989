"""The framework's compiler (the ``compiled`` check) and the eager path it is compared with.

The layer side implements this protocol per framework in ``layerside/<framework>/compile.py``; the judge
calls it through ``boundary.client.RemoteAdapter``. Imports nothing but the standard library and ``wire``."""
from __future__ import annotations

from dataclasses import dataclass

from .. import wire
from .autodiff import Gradients
from .not_applicable import NotApplicable


class CompileProtocol:
    # whether every compiler of ``compilers`` traces anew for every new input shape, by design (tf.function
    # without reduce_retracing, jax.jit): the compiled check then tries one new batch size, since a second
    # can only repeat what the first showed (torch's automatic dynamic shapes recompiles once, then reuses)
    retraces_per_shape: bool = False

    # -- the framework's compiler (the ``compiled`` check) ---------------------------------
    def compilers(self, backend: str | None = None) -> list[str]:
        """The compiler configurations the ``compiled`` check runs, in words (``backend``: the
        user's choice where the framework has several, e.g. torch.compile's)."""
        raise NotImplementedError

    def compile(self, fn, layer, compiler: str):
        """``fn`` (the layer, or the function as ``as_callable`` gives it; ``layer`` None for a
        function) under ``compiler``: an opaque object for ``compiled_call``/``compiled_vjp``
        that counts its traces. Raise ``NotApplicable`` where the mechanism cannot hold it."""
        raise NotImplementedError

    def compiled_call(self, compiled, inputs: list, training: bool = False):
        """The compiled output (native) in the given mode."""
        raise NotImplementedError

    def compiled_vjp(self, compiled, layer, inputs: list, wrt: list[int], cotangent) -> Gradients:
        """``vjp`` with the forward and backward computed by the compiled program (eval mode)."""
        raise NotImplementedError

    def compile_stats(self, compiled) -> CompileStats:
        """What the compiler did with ``compiled`` so far: a ``CompileStats``."""
        raise NotImplementedError

    def eager_call(self, fn, inputs: list, training: bool = False, op_by_op: bool = True):
        """The uncompiled output, as ``call``. JAX: under ``jax.disable_jit()`` with ``op_by_op``, else as the
        adapter's own ``call``, which traces the Python on every call (as eager execution runs it) and runs
        the traced program compiled; the other frameworks' ``call`` is eager either way."""
        return self.call(fn, inputs, training=training)

    def eager_vjp(self, fn, layer, inputs: list, wrt: list[int], cotangent, op_by_op: bool = True) -> Gradients:
        """The uncompiled ``vjp`` (``op_by_op``: as ``eager_call``)."""
        return self.vjp(fn, layer, inputs, wrt, cotangent)

    def compilation_cache(self, directory: str) -> None:
        """Keep the programs this process compiles in ``directory``, and reuse those found there. The judge
        makes one directory per target and gives it to that target's processes only (its layer executor and
        its fresh ones), so that a fresh process does not compile again what the layer's process compiled
        for the identical program. Frameworks without such a cache leave this out."""
        raise NotImplementedError


@wire.reply("compile.CompileStats")
@dataclass(frozen=True)
class CompileStats:
    """``compile_stats``: what the compiler did with a compiled object so far (counts since it was made)."""
    traces: int                           # times the user's Python ran under the compiler
    graphs: int                           # graphs captured
    breaks: tuple[str, ...] = ()          # one reason per graph break
    guard_failures: tuple[str, ...] = ()  # why a compiled graph was not reused, one per recompile
