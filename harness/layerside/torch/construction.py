"""PyTorch: the ways real code builds a layer (the ``construction`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect

import numpy as np
import torch

from ...protocol import NotApplicable, NotApplicablePart
from ...protocol.construction import ConstructionPart, ConstructionProtocol
from ...protocol.core import import_spec


class TorchConstruction(ConstructionProtocol):
    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        with torch.random.fork_rng(devices=[]):  # it seeds each build alike; the process's generator is kept
            return self._construction_run(impl, constructor, expected)

    def _construction_run(self, impl, constructor, expected):
        torch.manual_seed(0)
        plain = self.construct(impl, constructor)
        if not isinstance(plain, torch.nn.Module):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not an nn.Module", code="not_a_module")
        state = _module_state(plain)
        if not state:
            raise NotApplicable("the module holds no parameters or buffers: nothing for a factory keyword or an "
                                "initialisation to place", code="no_state")
        if any(isinstance(t, torch.nn.parameter.UninitializedTensorMixin) for t in state.values()):
            raise NotApplicable("a lazy module: its state takes its shape from the first call", code="lazy_module")
        torch.manual_seed(1)
        # slots that depend on the seed are random: they must be initialised (finite), not equal
        other = _module_state(self.construct(impl, constructor))
        random = {n for n, t in state.items() if n in other and not torch.equal(t, other[n])}
        return [_factory_part(self, impl, constructor, state),
                _meta_part(self, impl, constructor, state, random, expected["reset_parameters"] == "required")]


# -- construction (the construction check) ------------------------------------------------------------------
def _module_state(module) -> dict:
    """Every parameter and buffer, persistent or not, by its dotted name."""
    return {**dict(module.named_buffers()), **dict(module.named_parameters())}


def _factory_part(adapter, impl, constructor, plain) -> ConstructionPart:
    """``device=`` and ``dtype=``, where the constructor takes them, place every parameter and buffer."""
    part = "factory keyword arguments (device=, dtype=)"
    try:
        params = inspect.signature(impl).parameters
    except (TypeError, ValueError):
        params = {}
    missing = [k for k in ("device", "dtype") if k not in params]
    if missing:
        return ConstructionPart(part=part, not_applicable=NotApplicablePart(
            f"the constructor takes no {' or '.join(k + '=' for k in missing)}"))
    problems = []
    for said, kwargs, ok, what in (
            ("device='meta'", {"device": "meta"}, lambda t: t.is_meta, lambda t: f"on {t.device.type}"),
            ("dtype=torch.float64", {"dtype": torch.float64},
             lambda t: not t.is_floating_point() or t.dtype == torch.float64,
             lambda t: f"in {str(t.dtype).replace('torch.', '')}")):
        try:
            layer = adapter.construct(impl, {**constructor, **kwargs})
        except Exception as exc:
            problems.append(f"constructing with {said} raised {type(exc).__name__}: {exc}")
            continue
        got = _module_state(layer)
        wrong = [f"{n!r} ({what(t)})" for n, t in got.items() if not ok(t)]
        if wrong:
            problems.append(f"constructed with {said}, {len(wrong)} of {len(got)} parameter(s) and buffer(s) are "
                            f"not placed there: {', '.join(wrong)}")
    return ConstructionPart(part=part, problems=tuple(problems),
                            hint="construction_factory_ignored" if problems else None)


def _resetters(module) -> list:
    return [m for m in module.modules() if callable(getattr(type(m), "reset_parameters", None))]


def _shown(adapter, t) -> str:
    return np.array2string(adapter.numpy(t), threshold=6, edgeitems=3)


def _meta_part(adapter, impl, constructor, plain, random, required) -> ConstructionPart:
    """Construction under ``torch.device("meta")``, ``to_empty(device="cpu")``, every tensor filled with
    garbage (NaN, or a value unlike the plain build's), then ``reset_parameters`` of each module that defines
    it: the state must be a plain build's."""
    part = "construction on meta, to_empty and reset_parameters"
    try:
        with torch.device("meta"):
            layer = adapter.construct(impl, constructor)
    except Exception as exc:
        return ConstructionPart(part=part, problems=(f"construction under torch.device('meta') raised "
                                                     f"{type(exc).__name__}: {exc}",), hint=None)
    if not _resetters(layer):
        if required:
            return ConstructionPart(part=part, problems=("the module (and every submodule) has no reset_parameters, "
                                                         "which the contract requires (construction: "
                                                         "{reset_parameters: required})",),
                                    hint="construction_no_reset_parameters")
        return ConstructionPart(part=part, not_applicable=NotApplicablePart(
            "no reset_parameters: after construction on meta, to_empty leaves uninitialised memory nothing resets; "
            "containers such as transformers' PreTrainedModel initialise through _init_weights"))
    try:
        layer = layer.to_empty(device="cpu")
    except Exception as exc:
        return ConstructionPart(part=part, problems=(f"to_empty(device='cpu') after construction on meta raised "
                                                     f"{type(exc).__name__}: {exc}",), hint=None)
    with torch.no_grad():
        for n, t in _module_state(layer).items():
            want = plain.get(n)
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif want is not None and want.shape == t.shape and t.dtype == torch.bool:
                t.copy_(~want)
            elif want is not None and want.shape == t.shape:
                t.copy_(want + 1)
    torch.manual_seed(0)
    try:
        for m in _resetters(layer):
            m.reset_parameters()
    except Exception as exc:
        return ConstructionPart(part=part, hint=None,
                                problems=(f"reset_parameters() after to_empty raised {type(exc).__name__}: {exc}",))
    got = _module_state(layer)
    problems = []
    for n, want in plain.items():
        t = got.get(n)
        if t is None:
            problems.append(f"{n!r} is missing after construction on meta")
            continue
        t = t.detach()
        if t.shape != want.shape or t.dtype != want.dtype:
            problems.append(f"{n!r} is {list(t.shape)} {t.dtype} after construction on meta, "
                            f"{list(want.shape)} {want.dtype} in a plain build")
            continue
        floating = t.is_floating_point() or t.is_complex()
        if floating and bool(torch.isnan(t).any()) and not bool(torch.isnan(want).any()):
            problems.append(f"{n!r} is left uninitialised (still NaN) by reset_parameters")
        elif n in random:
            if floating and not bool(torch.isfinite(t).all()):
                problems.append(f"{n!r} (randomly initialised) is not finite after reset_parameters")
        elif not (torch.equal(t, want) or (floating and bool(torch.equal(t.isnan(), want.isnan()))
                                            and torch.equal(t.nan_to_num(), want.nan_to_num()))):
            problems.append(f"{n!r} differs from a plain build's after reset_parameters ({_shown(adapter, t)}; a "
                            f"plain build has {_shown(adapter, want)})")
    return ConstructionPart(part=part, problems=tuple(problems),
                            hint="construction_reset_incomplete" if problems else None)
