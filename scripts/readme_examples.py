"""The terminal examples of README.md and docs/checks.md, regenerated from real runs.

Each run writes a small user layer (the correct RMSNorm of tests/test_wheel.py, or a layer of the mutant
catalogue, renamed RMSNorm) into a project directory of its own as ``mypkg/layers.py``, runs the README's command
there through the public command line, and each example keeps the lines it shows of that output. Only what varies
between runs and machines is normalized: the project directory, the duration, the platform line's versions and the
plugins the harness does not bring. Left-out lines are marked by one "..." line each run of them. An example lives
between its markers in one of the files of FILES (README.md: the first run and the opening failure; docs/checks.md:
blocked checks, known mistakes, precision):

    <!-- example: NAME -->
    ```
    ...
    ```
    <!-- /example -->

    python scripts/readme_examples.py           # rewrite the example blocks of README.md and docs/checks.md
    python scripts/readme_examples.py --check   # exit 1 with a diff where a block differs from the real output
"""
import argparse
import ast
import difflib
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_wheel import USER_LAYERS, _clean_env  # noqa: E402  (the checkout's own modules, after the path)

README = ROOT / "README.md"
FILES = (README, ROOT / "docs" / "checks.md")   # the files that hold examples; each example is in exactly one
PROJECT = "~/myproject"   # what the temporary project directory reads as
COLUMNS = 140             # wide enough that pytest -v does not cut a blocked check's reason
MODULES_OF_THIS_REPO = ("tests", "reference_impls", "harness", "layer_conformance")


def _imports_local(node):
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in MODULES_OF_THIS_REPO


def _class_source(module, name, as_name):
    """(import lines, class sources) of class `name` of a module of this repository, renamed `as_name`, with the
    base classes it takes from this repository included under the names it uses for them."""
    folder = module.removeprefix("layer_conformance.reference_impls.").removeprefix("layer_conformance.")
    if folder != module:  # an installed name: its folder in the repository
        folder = ("reference_impls." if module.startswith("layer_conformance.reference_impls.") else "harness.") + folder
    text = (ROOT / (folder.replace(".", "/") + ".py")).read_text()
    tree = ast.parse(text)
    imports = [ast.get_source_segment(text, n) for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom)) and not _imports_local(n)]
    from_here = {a.asname or a.name: (n.module, a.name) for n in tree.body if _imports_local(n) for a in n.names}
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    classes = []
    for base in cls.bases:
        if isinstance(base, ast.Name) and (base.id in from_here or base.id in defined):
            base_module, base_name = from_here.get(base.id, (module, base.id))
            base_imports, base_classes = _class_source(base_module, base_name, base.id)
            imports += [i for i in base_imports if i not in imports]
            classes += base_classes
    source = ast.get_source_segment(text, cls)
    classes.append(re.sub(rf"^class {name}\b", f"class {as_name}", source))
    return imports, classes


def catalogue_layer(module, name):
    """A catalogue layer as a user's own module: its imports and its class (and repository bases), as RMSNorm."""
    imports, classes = _class_source(module, name, "RMSNorm")
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(classes) + "\n"


@dataclass(frozen=True)
class Run:
    layer: str          # the user's module, mypkg/layers.py
    args: tuple         # after `pytest`
    exit_code: int      # what the run must end with; anything else is not the example's output


RUNS = {
    "correct": Run(USER_LAYERS["torch"], ("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm"), 0),
    "untracked-gain": Run(catalogue_layer("tests.mutants.torch_mutants", "GainPlainTensor"),
                          ("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "-v"), 1),
    "eps-outside-sqrt": Run(catalogue_layer("tests.mutants.torch_mutants", "EpsOutsideSqrt"),
                            ("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "-v"), 1),
    "chapter-float16": Run(catalogue_layer("tests.mutants.torch_precision", "RMSNormChapter"),
                           ("--contract", "rmsnorm", "--impl", "mypkg.layers:RMSNorm", "--dtype", "float16"), 1),
}

FAILURE = (r"^=+ FAILURES =+$", r"^_+ \S+ _+$", r"^[^ ]+::\w+ failed: ", r"^reproduce: ")
COUNTS = r"^\d+ passed, \d+ failed, \d+ blocked"
# example -> (run, the lines it shows: None for all, else (pattern, at most how many) pairs, in any order)
EXAMPLES = {
    "first-run": ("correct", None),
    "untracked-gain": ("untracked-gain", [(p, None) for p in FAILURE]),
    "untracked-gain-blocked": ("untracked-gain", [(r"::parameters FAILED", None),
                                                  (r" SKIPPED \(not run: blocked by ", 4), (COUNTS, None)]),
    "eps-outside-sqrt": ("eps-outside-sqrt", [(r"::values (FAILED|SKIPPED \(not run: blocked by )", None),
                                              *((p, None) for p in FAILURE), (COUNTS, None)]),
    "chapter-float16": ("chapter-float16", [*((p, None) for p in FAILURE), (COUNTS, None)]),
}


def _own_plugins():
    """The pytest plugins the harness brings (itself and its dependencies), as pytest's header names them."""
    names = {re.split(r"[<>=!~;\[ ]", r)[0].lower() for r in importlib.metadata.requires("layer-conformance")
             if "extra ==" not in r}
    return {n.removeprefix("pytest-") for n in names} | {"layer-conformance"}


def _centred(title, width=COLUMNS, sep="="):
    # pytest's own separator line (TerminalWriter.sep), so a normalized title keeps pytest's layout
    fill = sep * max((width - len(title) - 2) // 2, 2)
    line = f"{fill} {title} {fill}"
    return line + sep if len(line) + 1 <= width else line


def normalize(text, project):
    own = _own_plugins()
    out = []
    for line in text.replace(str(project.resolve()), PROJECT).replace(str(project), PROJECT).splitlines():
        if line.startswith("platform "):
            line = re.sub(r"(\d+)\.\d+(\.\d+)?", r"\1.x", line)
        elif line.startswith("plugins: "):
            line = "plugins: " + ", ".join(p for p in line[len("plugins: "):].split(", ")
                                           if p.rsplit("-", 1)[0] in own)
        elif re.fullmatch(r"=+ .* in [\d.]+s( \([\d:]+\))? =+", line):
            line = _centred(re.sub(r" in [\d.]+s( \([\d:]+\))?$", " in ...s", line.strip("= ")))
        out.append(line.rstrip())
    return out


def run(name):
    spec = RUNS[name]
    with tempfile.TemporaryDirectory(prefix="readme-example-") as tmp:
        project = Path(tmp) / "myproject"
        (project / "mypkg").mkdir(parents=True)
        (project / "mypkg" / "__init__.py").write_text("")
        (project / "mypkg" / "layers.py").write_text(spec.layer)
        env = {**_clean_env(), "COLUMNS": str(COLUMNS), "LINES": "50"}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *spec.args], cwd=project,
                              env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != spec.exit_code:
            raise SystemExit(f"run {name!r} exited {proc.returncode}, not {spec.exit_code}:\n"
                             f"{proc.stdout[-6000:]}{proc.stderr[-3000:]}")
        return normalize(proc.stdout, project)


def cut(lines, keep):
    """The lines an example shows, each run of left-out lines one '...' line."""
    if keep is None:
        return lines
    counts = [0] * len(keep)
    shown = []
    for line in lines:
        hit = next((i for i, (p, most) in enumerate(keep)
                    if re.search(p, line) and (most is None or counts[i] < most)), None)
        if hit is not None:
            counts[hit] += 1
            shown.append(line)
        elif not shown or shown[-1] != "...":
            shown.append("...")
    missing = [p for (p, _), n in zip(keep, counts) if n == 0]
    if missing:
        raise SystemExit(f"the output has no line for {missing}:\n" + "\n".join(lines))
    return shown


def block(name, outputs):
    run_name, keep = EXAMPLES[name]
    command = "$ pytest " + " ".join(RUNS[run_name].args)
    return "```\n" + "\n".join([command, *cut(outputs[run_name], keep)]) + "\n```\n"


def marker(name):
    return re.compile(rf"(<!-- example: {re.escape(name)} -->\n)(.*?)(<!-- /example -->)", re.S)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an example block differs from the real output")
    opts = parser.parse_args()
    texts = {path: path.read_text() for path in FILES}
    where = {name: [path for path, text in texts.items() if marker(name).search(text)] for name in EXAMPLES}
    absent = [name for name, paths in where.items() if not paths]
    if absent:
        raise SystemExit(f"no file of {[p.relative_to(ROOT).as_posix() for p in FILES]} has markers for {absent}")
    twice = {name: [p.relative_to(ROOT).as_posix() for p in paths] for name, paths in where.items() if len(paths) > 1}
    if twice:
        raise SystemExit(f"examples with markers in more than one file: {twice}")
    outputs = {name: run(name) for name in RUNS}
    new = dict(texts)
    for name, (path,) in where.items():
        new[path] = marker(name).sub(lambda m: m.group(1) + block(name, outputs) + m.group(3), new[path])
    changed = [path for path in FILES if new[path] != texts[path]]
    if not changed:
        print("the examples are the real output")
        return 0
    if opts.check:
        for path in changed:
            rel = path.relative_to(ROOT).as_posix()
            sys.stdout.writelines(difflib.unified_diff(texts[path].splitlines(True), new[path].splitlines(True),
                                                       rel, "the real output"))
        return 1
    for path in changed:
        tmp = path.with_name(path.name + ".tmp")   # atomically: a reader never sees half a file
        tmp.write_text(new[path])
        os.replace(tmp, path)
        print(f"{path.relative_to(ROOT).as_posix()}: examples regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
