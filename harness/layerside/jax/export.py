"""JAX (Flax NNX): whole-layer formats (the ``export`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ...protocol import NotApplicable
from ...protocol.core import import_spec
from ...protocol.export import ExportNotes, ExportProtocol
from .core import _wants_x64, _x64


class JaxExport(ExportProtocol):
    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["jax.export", "nnx"] if isinstance(obj, nnx.Module) else ["jax.export"]

    def export_save(self, obj, fmt, examples, path):
        import os
        import pickle
        os.makedirs(path, exist_ok=True)
        if fmt == "jax.export":
            from jax import export
            if isinstance(obj, nnx.Module):
                obj.eval()
                graphdef, state = nnx.split(obj)
                fn = lambda *xs: nnx.merge(graphdef, state)(*xs)  # noqa: E731  (state baked in as constants)
            else:
                fn = obj
            for i, xs in enumerate(examples):
                with _x64(_wants_x64(*xs)):
                    shapes = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in xs]
                    try:  # one trace: the export's own
                        exported = export.export(jax.jit(fn))(*shapes)
                    except (jax.errors.UnexpectedTracerError, jax.errors.ConcretizationTypeError) as exc:
                        # what the harness's own calls do with it too: such a function runs eagerly only
                        raise NotApplicable("jax.export holds programs traced with abstract inputs, and this one "
                                          "cannot be traced that way: " + str(exc).splitlines()[0], code="untraceable") from None
                    # vjp_order=1: without it the deserialized program has no VJP at all
                    blob = exported.serialize(vjp_order=1)
                with open(os.path.join(path, f"program{i}.bin"), "wb") as f:
                    f.write(blob)
            return ExportNotes(gradients="kept", state_gradients="the state is baked into the program as constants")
        if fmt == "nnx":
            graphdef, state = nnx.split(obj)
            # the graph definition pickles by class (a deployment imports the module); the state as numpy
            with open(os.path.join(path, "layer.pkl"), "wb") as f:
                pickle.dump((graphdef, jax.tree.map(_to_numpy_keeping_keys, state)), f)
            return ExportNotes(gradients="kept")
        raise NotApplicable(f"{fmt} is not a JAX format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        import glob
        import os
        import pickle
        if fmt == "jax.export":
            from jax import export
            programs = {}
            for name in sorted(glob.glob(os.path.join(path, "program*.bin"))):
                with open(name, "rb") as f:
                    program = export.deserialize(bytearray(f.read()))
                programs[tuple((tuple(a.shape), str(a.dtype)) for a in program.in_avals)] = program

            def call(*xs):
                key = tuple((tuple(np.shape(a)), str(a.dtype)) for a in xs)
                if key not in programs:
                    raise ValueError(f"no exported program for inputs {key} (exported: {sorted(programs)})")
                return programs[key].call(*xs)
            return call, None
        if fmt == "nnx":
            import_spec(impl_spec)
            with open(os.path.join(path, "layer.pkl"), "rb") as f:
                graphdef, state = pickle.load(f)
            with jax.default_device(self._device(None)):
                layer = nnx.merge(graphdef, jax.tree.map(_from_numpy_keeping_keys, state,
                                                         is_leaf=lambda v: isinstance(v, _KeyData)))
            return layer, layer
        raise NotApplicable(f"{fmt} is not a JAX format", code="no_format")


class _KeyData:
    """A PRNG key array as pickled plain data (typed keys refuse numpy conversion)."""

    def __init__(self, data, impl):
        self.data, self.impl = data, impl


def _to_numpy_keeping_keys(v):
    if isinstance(v, jax.Array) and jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key):
        return _KeyData(np.asarray(jax.random.key_data(v)), str(jax.random.key_impl(v)))
    return np.asarray(v)


def _from_numpy_keeping_keys(v):
    if isinstance(v, _KeyData):
        return jax.random.wrap_key_data(jnp.asarray(v.data), impl=v.impl)
    return jax.device_put(np.asarray(v))  # on the default device, as jnp.asarray, without its compilation
