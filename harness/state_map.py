"""A state map's entries: ``slot=path`` with an optional chain of axis transforms, ``slot=path|T``,
``slot=path|permute(1,0,2)``, ``slot=path|reshape(8,2,4)``, applied left to right.

The chain maps the layer's variable to the contract slot's layout (layer -> contract): a value read from the
layer goes through the chain, a value written into it through the inverse (inverse permutations, in reverse
order, then reshaped back to the variable's own shape). The steps only move elements, so a gradient goes the
way its variable's value goes.

A leaf module (numpy only): the judge parses and checks the entries, the checks apply them to arrays read from
the layer's executor.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

OPS = ("T", "permute", "reshape")
_STEP = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*$")


class StateMapError(ValueError):
    """A state map entry that cannot be read or does not fit its variable: a usage or contract error."""


@dataclass(frozen=True)
class Step:
    op: str            # one of OPS
    args: tuple = ()   # permute's axes, reshape's dimensions (-1 allowed once)

    def text(self) -> str:
        return self.op if self.op == "T" else f"{self.op}({','.join(map(str, self.args))})"


def chain_text(steps) -> str:
    """``|T|reshape(8,8)``: the chain as written after the path ('' for none)."""
    return "".join("|" + s.text() for s in steps)


def _step(text: str, entry: str) -> Step:
    m = _STEP.match(text)
    if not m or m.group(1) not in OPS:
        raise StateMapError(f"{entry!r}: unknown transform {text.strip()!r}; the transforms are T, "
                            f"permute(AXES...) and reshape(DIMS...), e.g. w=lin.weight|T")
    op, inner = m.group(1), m.group(2)
    if op == "T":
        if inner is not None:
            raise StateMapError(f"{entry!r}: T takes no arguments (it reverses the axes): write |T")
        return Step("T")
    if inner is None or not inner.strip():
        raise StateMapError(f"{entry!r}: {op} needs its {'axes' if op == 'permute' else 'dimensions'} in "
                            f"parentheses, e.g. {op}(1,0,2)")
    try:
        args = tuple(int(a) for a in inner.replace(" ", "").split(","))
    except ValueError:
        raise StateMapError(f"{entry!r}: {op}({inner}) takes whole numbers") from None
    if op == "permute" and sorted(args) != list(range(len(args))):
        raise StateMapError(f"{entry!r}: permute({inner}) is not a permutation of the axes 0..{len(args) - 1}")
    if op == "reshape" and (args.count(-1) > 1 or any(a < -1 for a in args)):
        raise StateMapError(f"{entry!r}: reshape({inner}) takes dimensions >= 0 and at most one -1")
    return Step(op, args)


def parse(value: str) -> tuple[str, tuple[Step, ...]]:
    """A mapping's right-hand side, ``path|step|step``, as (path, steps); StateMapError where it cannot be read."""
    path, *steps = str(value).split("|")
    if not path.strip() and steps:
        raise StateMapError(f"{value!r}: no variable named before the transforms")
    return path.strip(), tuple(_step(s, str(value)) for s in steps)


def split_items(text: str) -> list[str]:
    """``a=x, b=y|permute(1,0,2)``: the pairs of one option value, split at commas and spaces outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in str(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and (ch == "," or ch.isspace()):
            if cur:
                out.append(cur)
            cur = ""
            continue
        cur += ch
    if cur:
        out.append(cur)
    return out


def shapes(steps, shape) -> list[tuple]:
    """The shape before each step and after the last (``shapes(steps, var)[-1]`` is the slot's); StateMapError
    naming the step where a step does not fit the shape it gets."""
    out = [tuple(int(d) for d in shape)]
    for step in steps:
        cur = out[-1]
        if step.op == "T":
            out.append(cur[::-1])
        elif step.op == "permute":
            if len(step.args) != len(cur):
                raise StateMapError(f"{step.text()} does not fit shape {list(cur)}: it names {len(step.args)} "
                                    f"axes, the value has {len(cur)}")
            out.append(tuple(cur[a] for a in step.args))
        else:
            size = int(np.prod(cur, dtype=np.int64))
            known = int(np.prod([a for a in step.args if a != -1], dtype=np.int64))
            dims = step.args
            if -1 in dims:
                if known == 0 or size % known:
                    raise StateMapError(f"{step.text()} does not fit shape {list(cur)} ({size} elements)")
                dims = tuple(size // known if a == -1 else a for a in dims)
            if int(np.prod(dims, dtype=np.int64)) != size:
                raise StateMapError(f"{step.text()} does not fit shape {list(cur)}: {size} elements, not "
                                    f"{int(np.prod(dims, dtype=np.int64))}")
            out.append(tuple(dims))
    return out


def to_slot(steps, value: np.ndarray) -> np.ndarray:
    """A variable's value (or gradient) in the slot's layout."""
    value = np.asarray(value)
    for step, shape in zip(steps, shapes(steps, value.shape)[1:]):
        value = value.transpose() if step.op == "T" else \
            value.transpose(step.args) if step.op == "permute" else value.reshape(shape)
    return np.ascontiguousarray(value)


def to_variable(steps, value: np.ndarray, variable_shape) -> np.ndarray:
    """A slot's value in the variable's own layout (the chain's inverse, from the variable's shape)."""
    value = np.asarray(value)
    before = shapes(steps, variable_shape)
    for step, shape in reversed(list(zip(steps, before[:-1]))):
        value = value.transpose() if step.op == "T" else \
            value.transpose(np.argsort(step.args)) if step.op == "permute" else value.reshape(shape)
    return np.ascontiguousarray(value)


class Held(str):
    """A variable's name as a slot map gives it, with the chain that turns its value into the slot's
    (``steps``) and its own shape (``shape``). A plain name (no chain) is a plain ``str``."""
    steps: tuple = ()
    shape: tuple = ()

    def __new__(cls, name: str, steps=(), shape=()):
        held = super().__new__(cls, name)
        held.steps, held.shape = tuple(steps), tuple(shape)
        return held

    @property
    def slot_shape(self) -> tuple:
        return shapes(self.steps, self.shape)[-1]


def slot_value(name, value):
    """``value`` read from the variable ``name`` (a slot map's), in the slot's layout."""
    steps = getattr(name, "steps", ())
    return to_slot(steps, value) if steps else value


def variable_value(name, value):
    """A slot's ``value``, to be written into the variable ``name`` (a slot map's), in the variable's layout."""
    steps = getattr(name, "steps", ())
    return to_variable(steps, value, name.shape) if steps else value


def proposed(slot: str, names, wants: dict | None = None) -> str | None:
    """What ``--state-map SLOT=`` should say for ``slot`` among the layer's unmatched ``names`` (or {name: shape}):
    the one name that holds the slot's name as a component of its dotted path ('w1' in 'w1.weight'; 'w1/kernel'
    written 'w1.kernel'), with ``|T`` where it holds the slot (``wants``: {slot: shape}) with its axes reversed;
    else, where no name has the slot's shape and exactly one has it reversed (torch's Linear weight [out, in] for
    a slot [in, out]), that one with ``|T``. None where neither tells."""
    shapes = names if isinstance(names, dict) else {}
    want = tuple((wants or {}).get(slot, ()))

    def flipped(name) -> str:
        shape = tuple(shapes.get(name, ()))
        return "|T" if len(want) > 1 and shape != want and shape[::-1] == want else ""

    found = [n for n in names if slot in re.split(r"[./:\[\]]", str(n))]
    if len(found) == 1:
        return str(found[0]).replace("/", ".") + flipped(found[0])
    if len(want) < 2 or any(tuple(s) == want for s in shapes.values()):
        return None
    reversed_ = [n for n in shapes if flipped(n)]
    return str(reversed_[0]).replace("/", ".") + "|T" if len(reversed_) == 1 else None
