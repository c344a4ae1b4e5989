"""--conformance-json PATH: the results file (its format and its reader: layer_conformance.results, docs/results.md),
written atomically from the result's document."""
from __future__ import annotations

import json
import os

from .. import results
from ..record import as_records
from .base import Output, write_file


def addoption(group, parser) -> None:
    group.addoption("--conformance-json", metavar="PATH", help="write the results file here")
    parser.addini("conformance_json", "default --conformance-json", type="string", default=None)


def target(config) -> str | None:
    return config.getoption("conformance_json") or config.getini("conformance_json") or None


def write(result, path) -> str:
    doc = dict(result.document, results=[r.to_json() for r in as_records(result.document.get("results", []))])
    if results.HASH_FIELD in doc:   # what is written is what its hash says (as results.write_document writes it)
        doc = results.with_hash(doc)
    write_file(path, json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return f"results: {os.path.abspath(path)}"


OUTPUT = Output(name="json", options=("--conformance-json",), addoption=addoption, target=target, write=write)
