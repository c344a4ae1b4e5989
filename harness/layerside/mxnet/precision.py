"""MXNet Gluon 1.9.1: dtypes and mixed precision.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import copy
import os

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon

from ...protocol import NotApplicable, NotApplicablePart
from ...protocol.precision import MixedPrecisionPolicy, MixedPrecisionRun, PrecisionProtocol
from .core import _NO_DTYPE, _array


def _contexts(param) -> list:
    try:
        return param.list_ctx()
    except (RuntimeError, AssertionError):  # not initialized yet: it will be, on the CPU by default
        return [mx.cpu(0)]


def _amp_dtype(t) -> str:
    """An array's dtype by name; MXNet's bfloat16 is a numpy structured type (('bfloat16', '<u2'))."""
    dt = np.dtype(t.dtype)
    return "bfloat16" if dt.names == ("bfloat16",) else dt.name


class MXNetPrecision(PrecisionProtocol):
    def to_dtype(self, layer, dtype):
        if dtype in _NO_DTYPE:
            raise NotApplicable(_NO_DTYPE[dtype], code="no_dtype")
        if not isinstance(layer, gluon.Block):
            return layer
        dense = []
        layer.apply(lambda b: dense.append(b) if isinstance(b, gluon.nn.Dense) else None)
        if dtype == "float16" and dense and all(c.device_type == "cpu" for d in dense
                                                for p in d.collect_params().values() for c in _contexts(p)):
            raise NotApplicable("MXNet 1.9.1's FullyConnected (gluon.nn.Dense) runs in float16 only through "
                              "cuDNN, not on the CPU", code="no_kernel")
        # a hybridized block's cached op holds ctypes pointers that cannot be copied; it is
        # rebuilt on the next call
        layer.apply(lambda b: b._clear_cached_op() if isinstance(b, gluon.HybridBlock) else None)
        try:
            layer64 = copy.deepcopy(layer)
        except (TypeError, ValueError):  # something else the layer holds cannot be copied
            return None
        for p in layer64.collect_params().values():
            if np.issubdtype(np.dtype(p.dtype), np.floating):  # a bool mask stays bool
                p.cast(dtype)
        return layer64

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    # Gluon 1.x keeps float32 master weights only under AMP (mxnet.contrib.amp): amp.init() patches every
    # operator of mx.nd/mx.sym for good to cast per operator, so each target dtype runs in a process of its own.
    _AMP = {"amp.init(target_dtype='float16')": "float16", "amp.init(target_dtype='bfloat16')": "bfloat16"}

    def mixed_precision_policies(self, obj, function=False):
        return [MixedPrecisionPolicy(policy=name, variables="float32", compute=compute, output=None, isolated=True)
                for name, compute in self._AMP.items()] + [
            MixedPrecisionPolicy(policy="Block.cast('float16')", not_applicable=NotApplicablePart(
                "it casts the parameters themselves (no float32 master weights are kept): whole-model 16-bit, not "
                "mixed precision")),
            MixedPrecisionPolicy(policy="a dtype policy (Keras-style)",
                                 not_applicable=NotApplicablePart("Gluon 1.x has none outside AMP"))]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        from mxnet.contrib import amp
        target = self._AMP[policy]
        amp.init(target_dtype=target)  # before the user's module is imported, as AMP's tutorial has it
        if target == "bfloat16":
            _probe_bfloat16()
        impl, layer = self.built_with(impl, constructor, inputs, assign)
        fn = layer if layer is not None else self.as_callable(impl)
        args = [_array(a) for a in inputs]
        for i in wrt:
            args[i].attach_grad()
        params = self.trainable(layer) if layer is not None else {}
        if layer is not None:
            layer.collect_params().zero_grad()
        with autograd.record(train_mode=False):
            out = fn(*args)
            if not isinstance(out, mx.nd.NDArray):
                raise TypeError(f"the output is a {type(out).__name__}, not an MXNet array")
            wide = out.astype("float32") if _amp_dtype(out) in ("float16", "bfloat16") else out
            loss = (wide * _array(np.asarray(cotangent).reshape(out.shape), dtype=wide.dtype)).sum() \
                if cotangent is not None else None
        if loss is not None:
            loss.backward()
        mx.nd.waitall()
        grads = {n: None if p.grad_req == "null" else _amp_dtype(p.grad(p.list_ctx()[0])) for n, p in params.items()}
        variables = {n: _amp_dtype(p.data(p.list_ctx()[0])) for n, p in
                     {**self.non_trainable(layer), **params}.items()} if layer is not None else {}
        return MixedPrecisionRun(
            mechanism=policy, output_dtype=_amp_dtype(out), output=wide.asnumpy(), variables=variables,
            gradients=grads, compute_dtype=None, input_dtypes=tuple(_amp_dtype(a) for a in args),
            input_gradients=tuple(_amp_dtype(args[i].grad) if i in wrt else None for i in range(len(args))), notes=())


def _probe_bfloat16(wait_s: float = 60.0) -> None:
    """Raise NotApplicable where this CPU cannot run AMP's bfloat16 operators (FullyConnected, Convolution,
    forward and backward): oneDNN runs bfloat16 only with bfloat16 instructions (AVX512-BF16, AMX), and
    where it picks AMX tiles that the kernel has not granted to the process, the process dies of SIGILL.
    The probe runs in a child process, so that a CPU's failure, crash included, is never the layer's.
    Forked before anything has computed here (as the zygote forks this process), so no thread pool is
    half-copied; by hand, not multiprocessing: its child flushes the stdio buffers it inherited, and this
    process's stdio may carry the executor's channel."""
    import select
    import signal
    import time
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the operators, say what failed, leave without the parent's atexit
        code = 0
        try:
            os.close(read)
            dense, conv = gluon.nn.Dense(64, in_units=64), gluon.nn.Conv2D(8, 3, in_channels=4)
            dense.initialize()
            conv.initialize()
            x, img = mx.nd.ones((16, 64)), mx.nd.ones((2, 4, 8, 8))
            x.attach_grad()
            img.attach_grad()
            with autograd.record():
                loss = dense(x).astype("float32").sum() + conv(img).astype("float32").sum()
            loss.backward()
            x.grad.asnumpy(), img.grad.asnumpy()
        except BaseException as exc:  # noqa: BLE001 - whatever it is, the parent reports it
            os.write(write, (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200].encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    said, left, end = b"", False, time.monotonic() + wait_s
    try:
        while not left and time.monotonic() < end:
            ready, _, _ = select.select([read], [], [], max(0.0, end - time.monotonic()))
            if ready:
                chunk = os.read(read, 4096)
                said, left = said + chunk, not chunk  # end of file: the child has left (or is leaving)
    finally:
        os.close(read)
    if not left:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if not left:
        raise NotApplicable(f"MXNet's bfloat16 operators did not finish on this CPU in {wait_s:.0f} s", code="no_kernel")
    if os.WIFSIGNALED(status):
        raise NotApplicable(f"MXNet's bfloat16 operators kill the process on this CPU "
                          f"({signal.Signals(os.WTERMSIG(status)).name}): its oneDNN cannot run them here", code="no_kernel")
    if os.WEXITSTATUS(status) != 0:
        raise NotApplicable(f"this CPU has no bfloat16 kernels for MXNet's oneDNN ({said.decode(errors='replace')})", code="no_kernel")
