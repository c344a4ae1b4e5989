"""PyTorch: the vectorising transform (``vmap``).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import torch

from ...protocol import NotApplicable
from ...protocol.batching import BatchingProtocol, VmapGrads


class TorchBatching(BatchingProtocol):
    # -- the vectorising transform (the ``batching`` check) ----------------------------------------
    def _func_refused(self, exc, required):
        """torch.func's refusal of a custom autograd.Function it cannot transform, as n/a (not the layer's
        failure unless the contract asks for torch.func support)."""
        text = str(exc)
        if not required and isinstance(exc, RuntimeError) and "autograd.Function" in text and (
                "setup_context" in text or "vmap" in text):
            raise NotApplicable("a custom torch.autograd.Function here has no setup_context staticmethod and "
                                "vmap rule (vmap staticmethod or generate_vmap_rule = True), so torch.func cannot "
                                f"run it (torch: {text.splitlines()[0]}); the contract's batching: {{vmap: "
                                f"required}} makes this a failure", code="custom_function_no_vmap") from None
        raise exc

    def vmap_call(self, fn, layer, inputs, in_axes, axis, required=False):
        from torch.func import functional_call, vmap
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
            state = {**dict(layer.named_parameters()), **dict(layer.named_buffers())}
            fn = lambda *xs: functional_call(layer, state, xs)  # noqa: E731  (the transform's own way for a Module)
        try:
            with torch.no_grad():
                return vmap(fn, in_dims=tuple(in_axes), out_dims=axis)(*args)
        except Exception as exc:
            self._func_refused(exc, required)

    def vmap_vjp(self, fn, inputs, in_axes, axis, wrt, cotangent, required=False):
        from torch.func import vjp, vmap
        args = [a if isinstance(a, torch.Tensor) else self.tensor(a) for a in inputs]
        ct = self.tensor(cotangent)

        def of_wrt(*xs):  # fn as a function of the differentiated inputs
            full = list(args)
            for i, x in zip(wrt, xs):
                full[i] = x
            return full

        try:
            vectorised = vmap(fn, in_dims=tuple(in_axes), out_dims=axis)
            _, pull = vjp(lambda *xs: vectorised(*of_wrt(*xs)), *[args[i] for i in wrt])
            grad_of_vmap = dict(zip(wrt, pull(ct.to(args[wrt[0]].dtype))))

            def one(*xs_ct):  # one example's gradient: every input (batched or not) and its cotangent
                *xs, c = xs_ct
                _, pull = vjp(lambda *w: fn(*[dict(zip(wrt, w)).get(i, x) for i, x in enumerate(xs)]),
                              *[xs[i] for i in wrt])
                return pull(c)
            per = vmap(one, in_dims=(*in_axes, axis), out_dims=axis)(*args, ct.to(args[wrt[0]].dtype))
            vmap_of_grad = dict(zip(wrt, per))
        except Exception as exc:
            self._func_refused(exc, required)
        conv = lambda g: None if g is None else g.detach()  # noqa: E731
        return VmapGrads(grad_of_vmap=tuple(conv(grad_of_vmap.get(i)) for i in range(len(inputs))),
                         vmap_of_grad=tuple(conv(vmap_of_grad.get(i)) for i in range(len(inputs))))
