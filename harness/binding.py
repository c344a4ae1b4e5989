"""Whether a binding fits its layer's constructor.

The contract's constructor arguments reach the layer under its own names (``arg_map``; a target of ""
or None drops the argument), and every one of them must be a parameter the constructor takes: an
argument that the constructor would silently not get (a Keras layer's ``epsilon`` left at its default
while the contract says ``eps``) is a usage error, as is a required parameter the contract does not give.
The constructor's signature is read as plain data (``signature_of``) in the process that imported the
layer, and judged in the judge (``problem``) before any check runs: the usage error is said once.

A leaf module: no framework imported, nothing else of the harness but the framework registry.
"""
from __future__ import annotations

import difflib

from .frameworks import FRAMEWORKS

# arguments an adapter supplies itself (flax's ``rngs``)
SUPPLIED = frozenset({"rngs"})
# top-level modules of the frameworks: their classes pass **kwargs on to their bases, which validate them
# (torch's Module takes none, Keras's Layer only its own few): their named parameters are all they take
_FRAMEWORK_MODULES = frozenset(m for f in FRAMEWORKS.values() for m in (f.module, *f.watched)) | set(FRAMEWORKS)


def mapped(constructor: dict, arg_map: dict) -> dict:
    """The contract's constructor arguments under the layer's own names; those mapped to nothing dropped."""
    out = {}
    for name, value in constructor.items():
        own = arg_map.get(name, name)
        if own:
            out[own] = value
    return out


def signature_of(factory) -> dict | None:
    """What a class or factory takes by keyword, as plain data: ``params`` (every name it takes),
    ``required`` (those without a default) and ``takes_any`` (a ``**kwargs`` that keeps what it gets).
    A class's ``__init__`` that passes its ``**kwargs`` on to ``super().__init__`` takes what the next
    ``__init__`` in its MRO takes; a framework's own classes are taken to do so, and their bases to take
    their named parameters only. None where the signature cannot be read."""
    import inspect
    if not inspect.isclass(factory):
        try:
            params = list(inspect.signature(factory).parameters.values())
        except (TypeError, ValueError):
            return None
        return _summary(params, takes_any=any(p.kind is p.VAR_KEYWORD for p in params))
    names: list = []
    required = None
    for cls in factory.__mro__:
        init = cls.__dict__.get("__init__")
        if cls is object:
            break
        if init is None:
            continue
        try:
            params = list(inspect.signature(init).parameters.values())[1:]  # self
        except (TypeError, ValueError):
            return None
        own = _summary(params, takes_any=False)
        names += [n for n in own["params"] if n not in names]
        if required is None:
            required = own["required"]
        var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
        if var_kw is None:
            break
        if cls.__module__.split(".", 1)[0] not in _FRAMEWORK_MODULES and not _forwards_to_super(init, var_kw):
            return {"params": names, "required": required, "takes_any": True}
    return {"params": names, "required": required or [], "takes_any": False}


def _summary(params, takes_any: bool) -> dict:
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return {"params": [p.name for p in named], "required": [p.name for p in named if p.default is p.empty],
            "takes_any": takes_any}


def _forwards_to_super(init, var_kw: str) -> bool:
    """Whether ``__init__`` passes its ``**var_kw`` on to a base class's ``__init__`` (``super().__init__(
    **kwargs)`` or ``Base.__init__(self, **kwargs)``), read from its source; False where there is none."""
    import ast
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"
               and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == var_kw
                       for k in node.keywords)
               for node in ast.walk(tree))


def problem(spec: str, signature: dict | None, constructor: dict, arg_map: dict | None = None,
            unaccepted_too: bool = True) -> str | None:
    """Why the contract's ``constructor`` arguments (under ``arg_map``) do not fit a constructor of this
    ``signature``, in words that name both sides and the likely mapping; None where they fit.
    ``unaccepted_too=False``: only a required parameter left without an argument is a misfit (the executor's
    check at load, which every target passes, the bundled references included: a bundled Keras layer builds
    from its input and takes no ``d``; the judge judges the user's bindings whole before any check runs)."""
    if signature is None:
        return None
    arg_map = arg_map or {}
    given = mapped(constructor, arg_map)
    params = signature["params"]
    reasons = []
    missing = [n for n in signature["required"] if n not in given and n not in SUPPLIED]
    unaccepted = [] if signature["takes_any"] or not unaccepted_too else [a for a in constructor if arg_map.get(a, a)
                                                    and arg_map.get(a, a) not in params]
    if missing:
        reasons.append(f"it requires {', '.join(map(repr, missing))}, which the contract does not give (the "
                       f"contract gives {', '.join(map(repr, constructor)) or 'none'})")
    if unaccepted:
        said = [repr(a) if arg_map.get(a, a) == a else f"{a!r} (mapped to {arg_map[a]!r})" for a in unaccepted]
        reasons.append(f"the contract's {', '.join(said)} {'is' if len(said) == 1 else 'are'} not "
                       f"{'a parameter' if len(said) == 1 else 'parameters'} of it, so the layer would not get "
                       f"{'it' if len(said) == 1 else 'them'} (its parameters: "
                       f"{', '.join(map(repr, params)) or 'none'})")
        free = [n for n in missing + params if n not in given and n not in SUPPLIED]
        close = {arg: difflib.get_close_matches(arg, list(dict.fromkeys(free)), n=1, cutoff=0.5) for arg in unaccepted}
        # a name no close match explains takes the one required parameter left without an argument, where exactly one
        # is left and exactly one such name (d -> num_features beside eps -> epsilon)
        claimed = {c[0] for c in close.values() if c}
        unmatched = [a for a in unaccepted if not close[a]]
        left = [n for n in missing if n not in claimed]
        if len(unmatched) == 1 and len(left) == 1:
            close[unmatched[0]] = left
        fixes = [f"--arg-map {arg}={close[arg][0] if close[arg] else 'NAME'}" for arg in unaccepted]
        one = len(unaccepted) == 1
        how = (f"map {'it' if one else 'them'} with {' '.join(fixes)}, or, where the layer has no use for "
               f"{'it' if one else 'one'}, drop it with --arg-map {unaccepted[0]}= (in a bindings entry: "
               f"`arg_map: {{{unaccepted[0]}: null}}`)")
    else:
        how = "map one of the contract's arguments onto it with --arg-map CONTRACT=LAYER"
    if not reasons:
        return None
    return f"{spec} cannot be built from the contract's constructor arguments: {'; '.join(reasons)}; {how}"


def defaults_of(factory) -> dict:
    """The keyword parameters of a class or factory that have a plain default (a bool, int, float or str), as
    ``{name: default}``, in the signature's order: what ``python -m layer_conformance new`` writes as the
    contract's constructor arguments. Empty where the signature cannot be read."""
    import inspect
    try:  # a class's own __init__: a metaclass's __call__ (flax's nnx.Module) says only (*args, **kwargs)
        params = list(inspect.signature(factory.__init__ if inspect.isclass(factory) else factory).parameters.values())
    except (TypeError, ValueError):
        return {}
    params = params[1:] if inspect.isclass(factory) else params  # self
    return {p.name: p.default for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and type(p.default) in (bool, int, float, str)}
