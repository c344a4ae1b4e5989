"""PyTorch: gradients: vjp, jvp, hvp and whether a custom rule is recorded.

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import torch

from ...protocol.autodiff import AutodiffProtocol, SecondOrder, Tangents


class TorchAutodiff(AutodiffProtocol):
    # -- gradients ---------------------------------------------------------------------------
    def vjp(self, fn, layer, inputs, wrt, cotangent):
        leaves = [(a if isinstance(a, torch.Tensor) else self.tensor(a)) for a in inputs]
        leaves = [t.detach().clone().requires_grad_(True) if i in wrt else t for i, t in enumerate(leaves)]
        # the layer gets copies, not the leaves: a layer that writes into its input (declared aliasing: in_place)
        # may, where a leaf that requires grad refuses it; the gradient reaches the leaf all the same
        args = [t.clone() if i in wrt else t for i, t in enumerate(leaves)]
        return self._backward_through(fn, layer, args, wrt, cotangent,
                                      lambda out: self.tensor(cotangent).to(dtype=out.dtype, device=out.device),
                                      leaves=leaves)

    def custom_rule_recorded(self, fn, inputs, wrt):
        from torch.autograd.function import BackwardCFunction  # the node a Function's apply records
        args = [(a if isinstance(a, torch.Tensor) else self.tensor(a)).detach().clone().requires_grad_(i in wrt)
                for i, a in enumerate(inputs)]
        out = fn(*args)
        nodes, seen = [getattr(out, "grad_fn", None)], set()
        while nodes:
            node = nodes.pop()
            if node is None or node in seen:
                continue
            if isinstance(node, BackwardCFunction):
                return True
            seen.add(node)
            nodes.extend(n for n, _ in node.next_functions)
        return False

    def jvp(self, fn, layer, inputs, tangents):
        # forward_ad (dual tensors) also runs old-style Functions that define a jvp staticmethod,
        # which torch.func.jvp refuses without setup_context
        import warnings
        import torch.autograd.forward_ad as fwAD
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
        # torch's first make_dual loads its jvp decompositions through the deprecated jit.script
        with warnings.catch_warnings(), fwAD.dual_level():
            warnings.filterwarnings("ignore", message=".*torch.jit.script.* is deprecated", category=DeprecationWarning)
            args = []
            for a, t in zip(inputs, tangents):
                x = a if isinstance(a, torch.Tensor) else self.tensor(a)
                if t is not None:
                    x = fwAD.make_dual(x, self.tensor(t).to(x.dtype))
                args.append(x)
            out = fn(*args)
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
            primal, tangent = fwAD.unpack_dual(out)
            primal = primal.detach().clone()
            tangent = torch.zeros_like(primal) if tangent is None else tangent.detach().clone()
        return Tangents(output=primal, tangent=tangent)

    def hvp(self, fn, layer, inputs, wrt, cotangent, directions):
        args = []
        for i, a in enumerate(inputs):
            t = a if isinstance(a, torch.Tensor) else self.tensor(a)
            args.append(t.detach().clone().requires_grad_(True) if i in wrt else t)
        if isinstance(layer, torch.nn.Module):
            layer.train(False)
        out = fn(*args)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"the output is a {type(out).__name__}, not a torch.Tensor")
        if not out.requires_grad:
            return SecondOrder(inputs=(None,) * len(inputs))
        ct = self.tensor(cotangent).to(dtype=out.dtype, device=out.device)
        sources = [args[i] for i in wrt]
        # create_graph records the backward rule itself, so it can be differentiated again
        grads = torch.autograd.grad((out * ct).sum(), sources, create_graph=True, allow_unused=True)
        dot = [(g * self.tensor(directions[i]).to(g.dtype)).sum()
               for i, g in zip(wrt, grads) if g is not None and g.requires_grad]
        if not dot:  # a rule computed outside autograd (detached, numpy) gives constant gradients
            return SecondOrder(inputs=(None,) * len(inputs))
        second = torch.autograd.grad(torch.stack(dot).sum(), sources, allow_unused=True)
        by_index = dict(zip(wrt, second))
        return SecondOrder(inputs=tuple(None if by_index.get(i) is None else by_index[i].detach()
                                        for i in range(len(inputs))))
