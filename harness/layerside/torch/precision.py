"""PyTorch: dtypes and mixed precision.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import copy
import inspect

import torch

from ...protocol.precision import MixedPrecisionPolicy, MixedPrecisionRun, PrecisionProtocol
from .core import _plain


class TorchPrecision(PrecisionProtocol):
    def to_dtype(self, layer, dtype):
        if isinstance(layer, torch.nn.Module):
            return copy.deepcopy(layer).to(getattr(torch, dtype))  # floating parameters and buffers only
        return layer

    # -- mixed precision (the mixed_precision check) -------------------------------------------
    _AUTOCAST = "torch.autocast('cpu', dtype=torch.bfloat16)"

    def mixed_precision_policies(self, obj, function=False):
        # autocast casts per operator (its lists decide which run in bf16): the output dtype is not fixed
        return [MixedPrecisionPolicy(policy=self._AUTOCAST, variables="float32", compute="bfloat16", output=None)]

    def mixed_precision_run(self, impl, constructor, inputs, policy, assign=None, cotangent=None, wrt=()):
        impl, layer = self.built_with(impl, constructor, inputs, assign)
        if layer is not None:
            layer.train(False)
        fn = layer if layer is not None else self.as_callable(impl)
        args = [self.tensor(a) for a in inputs]
        args = [a.requires_grad_(True) if i in wrt else a for i, a in enumerate(args)]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
        if cotangent is not None and out.requires_grad:
            # the backward outside autocast, as torch's AMP recipe has it
            (out * self.tensor(cotangent).to(out.dtype)).sum().backward()
        notes = []
        if inspect.isclass(impl) and issubclass(impl, torch.autograd.Function):
            decorated = hasattr(impl.forward, "__wrapped__")  # torch.amp.custom_fwd wraps it (functools.wraps)
            notes.append("the Function's forward is decorated with torch.amp.custom_fwd" if decorated else
                         "the Function's forward is not decorated with torch.amp.custom_fwd: autocast stays on "
                         "inside it, and its backward runs without it")
        params = dict(layer.named_parameters()) if layer is not None else {}
        buffers = dict(layer.named_buffers()) if layer is not None else {}
        return MixedPrecisionRun(
            mechanism=self._AUTOCAST, output_dtype=self.dtype_name(out), output=_plain(out),
            variables={n: self.dtype_name(v) for n, v in {**buffers, **params}.items()},
            gradients={n: None if p.grad is None else self.dtype_name(p.grad) for n, p in params.items()},
            input_dtypes=tuple(self.dtype_name(a) for a in args),
            input_gradients=tuple(None if a.grad is None else self.dtype_name(a.grad) for a in args),
            compute_dtype=None, notes=tuple(notes))
