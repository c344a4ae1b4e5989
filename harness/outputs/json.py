"""--conformance-json PATH: the results file (its format and its reader: layer_conformance.results, docs/results.md),
written atomically from the result's document."""
from __future__ import annotations

import os

from .. import results
from .base import Output


def addoption(group, parser) -> None:
    group.addoption("--conformance-json", metavar="PATH", help="write the results file here")
    parser.addini("conformance_json", "default --conformance-json", type="string", default=None)


def target(config) -> str | None:
    return config.getoption("conformance_json") or config.getini("conformance_json") or None


def write(result, path) -> str:
    results.write_document(path, result.document)
    return f"results: {os.path.abspath(path)}"


OUTPUT = Output(name="json", options=("--conformance-json",), addoption=addoption, target=target, write=write)
