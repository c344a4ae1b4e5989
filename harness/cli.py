"""Command line: ``python -m layer_conformance report|merge|summary|warm|new``.

    python -m layer_conformance report RESULTS.json [MORE.json ...] -o out.html [--baseline OLD.json]
    python -m layer_conformance merge A.json B.json [...] -o C.json [--gate] [--baseline OLD.json] [--html out.html]
    python -m layer_conformance summary RESULTS.json [MORE.json ...]
    python -m layer_conformance new --impl mypkg:SwiGLU --input "x: [4, 16]" [--arg h=64] [--framework torch]
                                    [--reference other:SwiGLU] [--name swiglu] [-o contracts/swiglu.yaml]

``merge`` joins the results of separate runs (framework environments, CI shards) and, with ``--gate``
or ``--baseline``, gives the verdict a single run would have given: the shards of a split run are
gated together here, since each shard alone sees only part of the matrix. It merges only files that
cover their plan and are as their run wrote them (``layer_conformance.results.check_document``), each once.

Exit codes (``layer_conformance.exitcodes``): 0 done (gated: conformant, or no regressions), 1 gated:
failures or regressions (``layer_conformance.verdict``'s verdict, as in a pytest run), 4 usage error (bad
arguments; unreadable or conflicting results files; for ``merge``, a file whose run did not complete its
plan, that was edited after its run, or that is given twice).

``new`` drafts a contract from a layer (``layer_conformance.scaffold``: the layer is built and called in an
executor, never here): 0 written, 4 usage error (a required constructor argument not given, an import that
fails, a file that exists), 1 the layer raised while it was built or called on the drawn input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .exitcodes import EXIT_USAGE, exit_status


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # the harness's usage-error code, not argparse's 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _load_all(paths, merge=False) -> dict:
    """One file's document; several files merged. ``merge``: one file is merged too (checked as each is)."""
    from . import results
    docs = [results.load(p) for p in paths]
    if len(docs) == 1 and not merge:
        return docs[0]
    notes: list = []
    doc = results.merge(docs, names=paths, notes=notes)
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    return doc


def _report(args) -> int:
    from . import results
    from .report import write_html
    doc = _load_all(args.results)
    comparison = None
    if args.baseline:
        comparison = results.compare(results.load(args.baseline)["results"], doc["results"])
        print(f"baseline {args.baseline}: {comparison.summary()}")
    path = write_html(args.output, doc, comparison=comparison, baseline_name=args.baseline, title=args.title)
    print(f"conformance html: {path}")
    return 0


def _merge(args) -> int:
    from . import results
    from .verdict import verdict
    doc = _load_all(args.results, merge=True)
    baseline = results.load(args.baseline) if args.baseline else None
    out = Path(args.output)
    results.write_document(out, doc)   # written before the verdict: results are never lost
    print(f"merged {len(args.results)} file(s), {len(doc['results'])} records: {out}")
    # the shards' records carry the excuses their runs' expectations gave; each file covered its plan (merge)
    judged = verdict(doc["results"], baseline=baseline["results"] if baseline else None,
                     strict=args.strict_expectations, strict_na=args.strict_na)
    comparison = judged.comparison
    if args.html:   # the run's HTML output, reading the merged result as it reads a run's
        from .outputs import Result, html
        print(html.write(Result(verdict=judged, records=judged.records, document=doc, baseline=baseline,
                                baseline_name=args.baseline), args.html))
    if not (args.gate or baseline):
        return exit_status(None)   # merged, not gated: no verdict decides it
    if comparison is not None:
        # every baseline check counts: a shard whose results are missing shows as checks no longer run
        print(f"baseline {args.baseline}: {comparison.summary()}")
        for r in judged.failing:
            was = f"{r.outcome} in the baseline, not run now" if r in comparison.disappeared else r.outcome
            print(f"  REGRESSION: {r.describe()}: {was}")
    else:
        for r in judged.failing:
            print(f"  {r.outcome.upper()}: {r.describe()}")
    for r in judged.xpassed if judged.strict else ():
        print(f"  XPASS(strict): {r.describe()}: expected to fail, now passes")
    for text, _ in judged.lines():
        print(text)
    return exit_status(judged.exit_code)   # the run's one exit function: the verdict decides it here


def _summary(args) -> int:
    from .results import summary_table
    print(summary_table(_load_all(args.results)["results"]))
    return 0


def _warm(args) -> int:
    """The zygotes --keep-warm left running: listed, or (--stop) ended."""
    from .boundary import warm
    import time
    kept = warm.stop_all() if args.stop else warm.listing()
    for z in kept:
        print(f"{'ended' if args.stop else 'running'}: {z['framework']} zygote, pid {z['root_pid']}, started "
              f"{time.strftime('%H:%M:%S', time.localtime(z['started'] or 0))}, waits {z['idle_s']:g} s for a run")
    if not kept:
        print("no zygote is kept running (--keep-warm keeps one)")
    return 0


def _new(args) -> int:
    from .scaffold import ScaffoldError, new
    try:
        return new(args.impl, args.input, framework=args.framework, reference=args.reference, name=args.name,
                   output=args.output, args=args.arg, executor_python=args.executor_python, force=args.force)
    except ScaffoldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def _new_parser(sub) -> None:
    from .frameworks import FRAMEWORKS
    new = sub.add_parser("new", help="draft a contract (and a numpy reference stub) from a layer of your own")
    new.add_argument("--impl", required=True, metavar="MODULE:ATTR", help="the layer, e.g. mypkg.layers:SwiGLU")
    new.add_argument("--input", action="append", required=True, metavar="'NAME: [DIMS]'",
                     help="an input the layer takes, in order, e.g. \"x: [4, 16]\" (float32; "
                          "\"x: {shape: [4, 16], dtype: float64}\" for another dtype)")
    new.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                     help="a constructor argument (required for those without a default)")
    new.add_argument("--framework", choices=list(FRAMEWORKS), help="default: detected from the layer")
    new.add_argument("--reference", metavar="MODULE:ATTR",
                     help="another implementation to compare with, instead of a numpy reference stub")
    new.add_argument("--name", help="the contract's name (default: the layer's, in lower case)")
    new.add_argument("-o", "--output", metavar="CONTRACT.yaml", help="default: contracts/<name>.yaml")
    new.add_argument("--executor-python", action="append", default=[], metavar="FRAMEWORK=PYTHON",
                     help="the Python a framework's executors run in (mxnet=.venv-mxnet/bin/python)")
    new.add_argument("--force", action="store_true", help="overwrite the contract and stub if they exist")


def main(argv=None) -> int:
    from .results import ResultsFileError
    parser = _Parser(prog="python -m layer_conformance", description="Layer conformance results: HTML report, merge, summary; kept zygotes: warm; "
                                                                     "a contract drafted from your layer: new.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write the self-contained HTML report of one or more results files")
    rep.add_argument("results", nargs="+", metavar="RESULTS.json")
    rep.add_argument("-o", "--output", required=True, metavar="OUT.html")
    rep.add_argument("--baseline", metavar="OLD.json", help="show what changed against this results file")
    rep.add_argument("--title", default=None)
    mrg = sub.add_parser("merge", help="combine results files (e.g. from separate framework environments)")
    mrg.add_argument("results", nargs="+", metavar="RESULTS.json")
    mrg.add_argument("-o", "--output", required=True, metavar="OUT.json")
    mrg.add_argument("--gate", action="store_true",
                     help="exit 1 when a merged check fails or errors without an expectations entry")
    mrg.add_argument("--baseline", metavar="OLD.json",
                     help="gate on regressions against this results file instead (implies --gate)")
    mrg.add_argument("--strict-expectations", action="store_true",
                     help="with --gate: an expected failure that now passes fails the gate")
    mrg.add_argument("--strict-na", action="store_true",
                     help="with --gate: an n/a on the layer's own word that no shard's expectations accepted fails "
                          "the gate")
    mrg.add_argument("--html", metavar="OUT.html", help="also write the HTML report of the merged results")
    summ = sub.add_parser("summary", help="print the summary table (one row per target, one column per check)")
    summ.add_argument("results", nargs="+", metavar="RESULTS.json")
    warm = sub.add_parser("warm", help="list the zygotes kept running by --keep-warm, or end them (--stop)")
    warm.add_argument("--stop", action="store_true", help="end every kept zygote of this user")
    _new_parser(sub)
    args = parser.parse_args(argv)
    try:
        return {"report": _report, "merge": _merge, "summary": _summary, "warm": _warm,
                "new": _new}[args.command](args)
    except ResultsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
