"""Helpers every framework's adapter shares: attribute walking (state the framework does not know about) and the
one-line account of what an abstract evaluation raised. Imports no framework."""
from __future__ import annotations


def walk_attributes(root, is_state, children, describe, internal=frozenset(), max_depth=6):
    """Paths of values for which ``is_state`` holds, reached through plain attributes,
    lists, tuples and dicts of ``root`` and of its registered sub-layers.

    ``children(obj)`` yields (name, sub-layer) pairs the framework itself tracks, or None
    when ``obj`` is not a layer; ``internal`` names the framework's own bookkeeping attributes.
    """
    found: dict[str, str] = {}
    seen: set[int] = set()

    def visit(value, path, depth):
        if id(value) in seen or depth > max_depth:
            return
        if is_state(value):
            found[path] = describe(value)
            return
        kids = children(value)
        if kids is not None:
            seen.add(id(value))
            for name, child in kids:
                if child is not None:
                    visit(child, f"{path}.{name}" if path else name, depth + 1)
            for name, attr in vars(value).items():
                if name in internal or name.startswith("__"):
                    continue
                visit(attr, f"{path}.{name}" if path else name, depth + 1)
            return
        if isinstance(value, (list, tuple)):
            seen.add(id(value))
            for i, item in enumerate(value):
                visit(item, f"{path}[{i}]", depth + 1)
        elif isinstance(value, dict):
            seen.add(id(value))
            for k, item in value.items():
                visit(item, f"{path}[{k!r}]", depth + 1)

    visit(root, "", 0)
    return found


def abstract_error(exc) -> str:
    """What an abstract evaluation raised, in one line: the type, its message's lines (a Keras error's
    first line only names the call), cut at 600 characters, and where in the user's code."""
    from ..errors import unexpected_error
    text = " ".join(line.strip() for line in unexpected_error(exc).splitlines() if line.strip())
    cut = text.rfind(" (at ")
    body, where = (text[:cut], text[cut:]) if cut > 0 and text.endswith(")") else (text, "")
    return (body if len(body) <= 600 else body[:597] + "...") + where
