"""YAML with line numbers: a safe loader (no tag ever constructs a Python object) that remembers where each
field is, and reports what is not plain data instead of stopping at it."""
from __future__ import annotations

import yaml

from .problems import MAX_DEPTH, MAX_NODES, _field_name, _short

_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml parses ~10x faster


class _LineLoader(_SafeBase):
    """Safe loader (no object construction from tags) that remembers where each field is."""


_PLAIN_TAGS = frozenset(t for t in yaml.SafeLoader.yaml_constructors if t)  # null, bool, int, str, map...
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Structure(Exception):
    """What stops reading altogether: alias expansion, a recursive alias, nesting too deep."""

    def __init__(self, problems):
        self.problems = problems


def _load_with_lines(text: str):
    """Return (data, lines, problems, replaced): lines maps a field path tuple to its 1-based line.

    A node that cannot be taken as plain data (a Python or unknown tag, a value that fails
    to construct, a list as a key) is reported and replaced by a plain string, or dropped,
    so that reading goes on and every problem is listed at once. Only what could hang the
    loader (alias expansion, recursion, depth) stops it, by raising ``_Structure``.
    """
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, [], []
        reader = _Reader(loader)
        reader.walk(node, (), frozenset())
        data = loader.construct_document(node)
        return data, reader.lines, reader.problems, [_field_name(at) for at in reader.replaced]
    finally:
        loader.dispose()


def _where(n) -> int:
    return n.start_mark.line + 1


class _Reader:
    """One document's walk: where each field is, what is not plain data, and the bounds that stop the reading."""

    def __init__(self, loader):
        self.loader = loader
        self.lines: dict[tuple, int] = {}
        self.problems: list = []
        self.replaced: list = []  # fields whose value was replaced: no further problems are reported there
        self.budget = MAX_NODES

    def stop(self, at, msg):
        raise _Structure([(self.lines.get(at[:1]) or 1, _field_name(at[:1]), msg)])

    def plain(self, n, at) -> bool:
        """Report a tag that is not plain data and make the node plain; True if it was plain."""
        if n.tag in _PLAIN_TAGS:
            return True
        if n.tag.startswith("tag:yaml.org,2002:python/"):
            msg = (f"refused YAML tag {n.tag.replace('tag:yaml.org,2002:', '!!')!r}: contracts are plain "
                   "data, loaded with a safe loader that never builds Python objects")
        else:
            msg = f"unknown YAML tag {n.tag!r}: contracts use plain mappings, lists, strings, numbers, booleans"
        self.problems.append((_where(n), _field_name(at), msg))
        self.replaced.append(at)
        n.tag = {yaml.MappingNode: "tag:yaml.org,2002:map",
                 yaml.SequenceNode: "tag:yaml.org,2002:seq"}.get(type(n), "tag:yaml.org,2002:str")
        return False

    def walk(self, n, at, on_path):
        self.budget -= 1
        if self.budget < 0:
            self.stop(at, f"the document expands to more than {MAX_NODES} nodes (aliases repeated?); "
                          "a contract has a few hundred")
        if len(at) > MAX_DEPTH:
            self.stop(at, f"nested deeper than {MAX_DEPTH} levels")
        if id(n) in on_path:
            self.stop(at, f"an alias at {_field_name(at)} refers to a node that contains it (a recursive structure)")
        self.lines.setdefault(at, _where(n))
        self.plain(n, at)
        if isinstance(n, yaml.ScalarNode):
            self.scalar(n, at)
            return
        on_path = on_path | {id(n)}
        if isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                self.walk(v, at + (i,), on_path)
            return
        self.mapping(n, at, on_path)

    def scalar(self, n, at):
        try:
            self.loader.construct_object(n)
        except Exception as exc:  # e.g. a date-like scalar that is no date, an int too long
            self.problems.append((_where(n), _field_name(at), f"cannot read {_short(repr(n.value))}: {exc}"))
            self.loader.recursive_objects.pop(n, None)  # the failed attempt left it marked
            n.tag = "tag:yaml.org,2002:str"
            self.replaced.append(at)

    def mapping(self, n, at, on_path):
        own = self.own_keys(n, at)
        self.loader.flatten_mapping(n)  # resolve "<<: *anchor" merges; raises YAMLError on bad ones
        kept = []
        for k, v in n.value:
            try:  # merged-in keys have not been looked at yet
                if not isinstance(k, yaml.ScalarNode) or not self.plain(k, at):
                    raise ValueError("not a plain key")
                key = self.loader.construct_object(k)
            except Exception:
                self.problems.append((_where(k), _field_name(at), "a merged-in key must be a plain name"))
                continue
            kept.append((k, v))
            self.walk(v, at + (key,), on_path)
            # the key's own line is more useful than the value's for a mapping
            self.lines[at + (key,)] = own.get(key, _where(k))
        n.value = kept

    def own_keys(self, n, at) -> dict:
        """The mapping's own keys (before merges) -> their lines; keys that are not plain names are reported and
        dropped from ``n``, duplicates reported."""
        own, kept = {}, []
        for k, v in n.value:
            if k.tag == _MERGE_TAG:
                kept.append((k, v))
                continue
            if not isinstance(k, yaml.ScalarNode):
                self.problems.append((_where(k), _field_name(at), "a key must be a plain name, not a list or mapping"))
                continue
            if not self.plain(k, at):
                continue
            try:
                key = self.loader.construct_object(k)
            except Exception as exc:
                self.problems.append((_where(k), _field_name(at), f"cannot read key {_short(repr(k.value))}: {exc}"))
                continue
            if key in own:
                self.problems.append((_where(k), _field_name(at + (key,)), f"duplicate key {key!r} (first at line "
                                                                          f"{own[key]}); YAML would keep only the last"))
            else:
                own[key] = _where(k)
            kept.append((k, v))
        n.value = kept
        return own
