"""PyTorch: memory layouts, aliased inputs and what a call does to its inputs.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import numpy as np
import torch

from ...protocol.layout import InputChanges, LayoutProtocol


class _InPlaceOps:
    """The in-place operations (``Tensor.mul_``...) the forward applies to each input's memory: {input index:
    [operation names]}, seen below autograd by a dispatch mode (empty where torch has none)."""

    def __init__(self, args):
        self.ops: dict = {}
        self._storages = {}
        for i, t in enumerate(args):
            try:
                self._storages.setdefault(t.untyped_storage().data_ptr(), i)
            except (AttributeError, RuntimeError):
                pass
        self._mode = None
        try:
            from torch.utils._python_dispatch import TorchDispatchMode
        except ImportError:
            return
        watch = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                watch.saw(func, args)
                return func(*args, **(kwargs or {}))
        self._mode = Mode()

    def saw(self, func, args):
        name = getattr(getattr(func, "overloadpacket", None), "__name__", "")
        first = args[0] if args else None
        if not (name.endswith("_") and not name.startswith("_") and isinstance(first, torch.Tensor)):
            return
        try:
            i = self._storages.get(first.untyped_storage().data_ptr())
        except (AttributeError, RuntimeError):
            return
        if i is not None and f"Tensor.{name}" not in self.ops.setdefault(i, []):
            self.ops[i].append(f"Tensor.{name}")

    def __enter__(self):
        if self._mode is not None:
            self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
        return False


class TorchLayout(LayoutProtocol):
    def layouts(self, inputs):
        ranks = [np.ndim(a) for a in inputs]
        out = ["strided"]
        if any(r >= 2 for r in ranks):
            out.insert(0, "transposed")
        if any(r == 4 for r in ranks):
            out.append("channels_last")
        return out

    def _laid_out(self, a, layout):
        """``a`` (numpy) as a tensor with the same values laid out as ``layout``: "transposed" (the last two axes
        stored swapped: x.transpose(-1, -2).contiguous().transpose(-1, -2)), "strided" (every other element of a
        tensor twice as long in the last axis), "channels_last" (4-D), else contiguous. A fresh leaf."""
        t = self.tensor(a)
        if layout == "transposed" and t.dim() >= 2:
            t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        elif layout == "strided" and t.dim() >= 1:
            wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
            wide[..., ::2] = t
            t = wide[..., ::2]
        elif layout == "channels_last" and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        else:
            t = t.clone()
        return t.detach()

    def layout_vjp(self, fn, layer, inputs, wrt, cotangent, layout):
        args = [self._laid_out(a, layout).requires_grad_(i in wrt) for i, a in enumerate(inputs)]
        return self._backward_through(fn, layer, args, wrt, cotangent,
                                      lambda out: self._laid_out(np.asarray(cotangent), layout).to(dtype=out.dtype))

    def input_changes(self, fn, layer, inputs, wrt, cotangent):
        leaves = [self.tensor(a).clone().requires_grad_(i in wrt) for i, a in enumerate(inputs)]
        args = [t.clone() if t.requires_grad else t for t in leaves]  # not leaves: an in-place write is allowed
        before = [t.detach().clone() for t in args]
        versions = [t._version for t in args]
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
            layer.zero_grad(set_to_none=True)
        watch = _InPlaceOps(args)
        with watch:
            out = fn(*args)
        changed = lambda: [i for i, (t, b) in enumerate(zip(args, before))
                           if not torch.equal(torch.nan_to_num(t.detach()), torch.nan_to_num(b))]
        forward = changed()
        moved = [i for i, (t, v) in enumerate(zip(args, versions)) if t._version != v]
        backward = []
        grads = [None] * len(inputs)
        if isinstance(out, torch.Tensor) and out.requires_grad and cotangent is not None:
            ct = self.tensor(np.asarray(cotangent)).to(dtype=out.dtype)
            try:
                torch.autograd.backward(out, ct)
            except RuntimeError:
                if not (forward or moved):
                    raise
                # autograd refuses a backward through what the forward overwrote: the write is the finding
            backward = [i for i in changed() if i not in forward]
            grads = [leaves[i].grad if i in wrt else None for i in range(len(inputs))]
        state = {**self.non_trainable(layer), **self.trainable(layer)} if isinstance(layer, torch.nn.Module) else {}
        conv = lambda g: None if g is None else g.detach()
        return InputChanges(forward=tuple(forward), backward=tuple(backward), versions=tuple(moved), ops=watch.ops,
                            output=out.detach() if isinstance(out, torch.Tensor) else out,
                            input_grads=tuple(conv(g) for g in grads),
                            state_grads={k: conv(v.grad) for k, v in state.items()})
