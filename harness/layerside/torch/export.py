"""PyTorch: whole-layer formats (the ``export`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import types

import torch

from ...protocol import NotApplicable
from ...protocol.core import import_spec
from ...protocol.export import ExportNotes, ExportProtocol
from .core import _Calls, _custom_functions


class TorchExport(ExportProtocol):
    # -- export: whole-layer formats (the export check) ---------------------------------------
    def export_formats(self, obj):
        return ["torch.export", "torch.save", "state_dict"] if isinstance(obj, torch.nn.Module) else ["torch.export"]

    def export_save(self, obj, fmt, examples, path):
        import os
        os.makedirs(path, exist_ok=True)
        module = obj if isinstance(obj, torch.nn.Module) else _Calls(obj)
        if fmt == "torch.export":
            import json
            module.train(False)
            signatures, runs = [], []  # per saved program: its inputs' (rank, dtype, shape or None: dynamic)
            refused = (AssertionError, RuntimeError, ValueError)  # a program's input guards refuse the shapes
            for xs in examples:
                args = tuple(self.tensor(a) for a in xs)
                if any(_accepts(sig, args) and _runs(run, args, refused) for (sig, _), run in zip(signatures, runs)):
                    continue  # a program already exported takes these inputs: no second export
                # one program per rank and dtype with every size dynamic; where its guards refuse a case's
                # sizes (torch.export specializes boundary sizes, e.g. a slice up to a buffer's length), one
                # program for exactly those shapes, as a deployment serving them would export
                dynamic = not any(_accepts(sig, args, ranks_only=True) for sig, _ in signatures)
                program = None
                if dynamic:
                    dims = tuple({i: torch.export.Dim.AUTO for i in range(a.dim())} for a in args)
                    dims = (dims,) if isinstance(module, _Calls) else dims  # _Calls.forward(*xs) takes one tuple
                    program = torch.export.export(module, args, dynamic_shapes=dims)
                    if not _runs(program.module(), args, refused):
                        program = None
                exact = program is None
                if exact:
                    program = torch.export.export(module, args)
                sig = [[a.dim(), str(a.dtype), list(a.shape) if exact else None] for a in args]
                name = f"layer{len(signatures)}.pt2"
                torch.export.save(program, os.path.join(path, name))
                signatures.append((sig, name))
                runs.append(program.module())
            with open(os.path.join(path, "programs.json"), "w") as f:
                json.dump(signatures, f)
            custom = _custom_functions(module, args)
            return ExportNotes(gradients="kept" if not custom else
                               f"torch.export records the forward of the custom autograd.Function(s) "
                               f"{', '.join(custom)} and keeps no backward: the loaded program's gradient is "
                               f"autodiff of that forward")
        if fmt == "torch.save":
            torch.save(module, os.path.join(path, "layer.pt"))  # pickles the object; loading imports its class
            return ExportNotes(gradients="kept")
        if fmt == "state_dict":
            torch.save(module.state_dict(), os.path.join(path, "state.pt"))
            return ExportNotes(gradients="kept")
        raise NotApplicable(f"{fmt} is not a torch format", code="no_format")

    def export_load(self, fmt, path, impl_spec=None, constructor=None, examples=None):
        import os
        if fmt == "torch.export":
            import json
            programs = _Programs()
            with open(os.path.join(path, "programs.json")) as f:
                signatures = json.load(f)
            for i, (sig, name) in enumerate(signatures):
                module = torch.export.load(os.path.join(path, name)).module()
                # the program is fixed in the eval mode it was exported in; torch refuses train()/eval() on
                # it, which call() and vjp() use to set that same mode
                module.train = module.eval = types.MethodType(lambda self, mode=True: self, module)
                programs.add_module(f"p{i}", module)
                programs.signatures.append(sig)
            return programs, programs
        impl = import_spec(impl_spec)
        if fmt == "torch.save":
            # a whole pickled module is not loadable with weights_only=True: trusting the file is the deal
            module = torch.load(os.path.join(path, "layer.pt"), weights_only=False)
            return module, module
        if fmt == "state_dict":
            # a deployment's fresh instance of the class, from the constructor arguments, then the weights
            module = self.build(self.construct(impl, constructor or {}), examples[0])
            module.load_state_dict(torch.load(os.path.join(path, "state.pt"), weights_only=True), strict=True)
            return module, module
        raise NotApplicable(f"{fmt} is not a torch format", code="no_format")


class _Programs(torch.nn.Module):
    """Exported programs (per input rank and dtype, or per exact shapes), called as one layer."""

    def __init__(self):
        super().__init__()
        self.signatures = []

    def train(self, mode=True):
        return self  # each program is fixed in eval mode

    def forward(self, *xs):
        # exact-shape programs first: they exist where the dynamic one of that rank refuses the shapes
        order = sorted(range(len(self.signatures)), key=lambda i: any(s[2] is None for s in self.signatures[i]))
        for i in order:
            if _accepts(self.signatures[i], xs):
                return self._modules[f"p{i}"](*xs)
        raise ValueError(f"no exported program takes inputs {[(tuple(x.shape), str(x.dtype)) for x in xs]} "
                         f"(exported: {self.signatures})")


def _runs(program, args, refused) -> bool:
    try:
        program(*args)
        return True
    except refused:
        return False


def _accepts(sig, args, ranks_only=False) -> bool:
    """Whether a program exported for ``sig`` [(rank, dtype, shape or None)] takes tensors ``args``."""
    return len(sig) == len(args) and all(
        a.dim() == rank and str(a.dtype) == dtype and (ranks_only or shape is None or list(a.shape) == shape)
        for (rank, dtype, shape), a in zip(sig, args))
