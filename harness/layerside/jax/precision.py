"""JAX (Flax NNX): dtypes and mixed precision.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ...protocol import NotApplicable
from ...protocol.core import import_spec
from ...protocol.precision import MixedPrecisionPolicy, MixedPrecisionRun, PrecisionProtocol
from .core import _x64


class JaxPrecision(PrecisionProtocol):
    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _MIXED = "dtype=bfloat16, param_dtype=float32"

    def mixed_precision_policies(self, obj, function=False):
        if function or not inspect.isclass(obj):
            raise NotApplicable("flax's dtype/param_dtype are a Module's constructor arguments; a function computes "
                              "in its inputs' dtypes", code="no_precision_policy")
        try:
            params = inspect.signature(obj.__init__).parameters
        except (TypeError, ValueError):
            params = {}
        missing = [a for a in ("dtype", "param_dtype") if a not in params]
        if missing:
            raise NotApplicable(f"the constructor takes no {' or '.join(missing)} argument (flax.nnx's convention "
                              f"for mixed precision: params created in param_dtype, computed in dtype)", code="no_precision_policy")
        return [MixedPrecisionPolicy(policy=self._MIXED, variables="float32", compute="bfloat16", output="bfloat16")]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        layer = self.construct(impl, {**constructor, "dtype": jnp.bfloat16, "param_dtype": jnp.float32})
        self.build(layer, inputs)
        for name, value in (assign or {}).items():
            self.assign(layer, name, value)
        trainable = self.trainable(layer)
        grads, input_grads = {n: None for n in trainable}, [None] * len(inputs)
        if cotangent is not None:
            got = self.vjp(layer, layer, inputs, list(wrt), cotangent)
            out = got.output
            input_grads = [None if g is None else self.dtype_name(g) for g in got.inputs]
            grads = {n: None if got.state.get(n) is None else self.dtype_name(got.state[n]) for n in trainable}
        else:
            out = self.call(layer, inputs)
        if not isinstance(out, jax.Array):
            raise TypeError(f"the output is a {type(out).__name__}, not a jax.Array")
        values = out.astype(jnp.float32) if out.dtype in (jnp.bfloat16, jnp.float16) else out
        return MixedPrecisionRun(mechanism=f"{impl.__name__}(..., {policy})", output_dtype=self.dtype_name(out),
                                 output=np.asarray(values), compute_dtype=None, gradients=grads,
                                 variables={n: self.dtype_name(v) for n, v in self._variables(layer).items()},
                                 input_dtypes=tuple(str(np.asarray(a).dtype) for a in inputs),
                                 input_gradients=tuple(input_grads), notes=())

    def to_dtype(self, layer, dtype):
        if not isinstance(layer, nnx.Module):
            return layer
        copy = nnx.clone(layer)
        with _x64(dtype == "float64"):
            if dtype == "float64" and not jax.config.jax_enable_x64:
                return None  # no local x64 switch in this jax
            nnx.update(copy, jax.tree.map(lambda x: _cast(x, dtype) if jnp.issubdtype(x.dtype, jnp.floating)
                                          else x, nnx.state(copy)))
        return copy


def _cast(x, dtype):
    """``x.astype(dtype)`` cast by numpy where the two round alike (from float32: ml_dtypes for bfloat16, both to
    nearest even), placed as ``x`` was, committed only where it was: on the device each state shape and dtype is
    a compilation of its own (issue 47), and ``device_put`` compiles nothing where ``jnp.asarray`` does."""
    if not isinstance(x, jax.Array) or x.dtype != np.float32:
        return x.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is inf, as on the device, and no warning
        value = np.asarray(x).astype(jnp.dtype(dtype))
    if x.committed:
        return jax.device_put(value, x.sharding)
    with jax.default_device(next(iter(x.devices()))):
        return jax.device_put(value)
