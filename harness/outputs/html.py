"""--conformance-html PATH: the self-contained HTML report (rendered by layer_conformance.report) of the result's
document, with the diff against the --baseline where the verdict made one; written atomically."""
from __future__ import annotations

import os

from .. import results
from ..report import render_html
from .base import Output, write_file


def addoption(group, parser) -> None:
    group.addoption("--conformance-html", metavar="PATH", help="write a self-contained HTML report here")
    parser.addini("conformance_html", "default --conformance-html", type="string", default=None)


def target(config) -> str | None:
    return config.getoption("conformance_html") or config.getini("conformance_html") or None


def write(result, path) -> str:
    page = render_html(result.document, baseline=result.baseline, comparison=result.verdict.comparison,
                       baseline_name=result.baseline_name)
    write_file(path, page)
    return f"conformance html: {os.path.abspath(path)}"


OUTPUT = Output(name="html", options=("--conformance-html",), addoption=addoption, target=target, write=write)
