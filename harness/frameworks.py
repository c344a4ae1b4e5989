"""The one registry of frameworks. Everything that names the frameworks takes the names from here.

Importing this module imports no framework. To add a framework: an entry here and an adapter folder
``harness/layerside/<name>/`` with the same files as the others (docs/adding.md). The contract schema's framework
names and export formats are filled in from here when it is loaded.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    name: str                # the --framework value and the adapter module's name
    module: str              # the top-level module whose presence in sys.modules marks the framework
    dists: tuple[str, ...]   # distributions whose versions a results file records
    export_formats: tuple[str, ...] = ()  # what a contract's export.formats may name for it
    watched: tuple[str, ...] = ()  # top-level modules whose functions a layer must not replace (executor health)
    # where a run that checks everything in one process (-n 0) puts this framework's targets: the quickest
    # import first, so that the judge waits least for its first executor and the slower imports overlap
    # earlier frameworks' checks (measured: flax 1.9 s, torch with Dynamo 3.2 s, tensorflow 6.2 s)
    start_rank: int = 0
    # how a custom backward learns which inputs need a gradient, where it can (torch's ctx.needs_input_grad): the
    # gradients check then also differentiates each input alone. None where a rule computes every cotangent
    # whatever is differentiated (JAX, TensorFlow), or the framework's Function mishandles it (MXNet 1.9.1 gives
    # zeros to every input but the first where the first needs none)
    input_grad_flags: str | None = None
    # how its dense layer holds the matrix, for the numpy reference stub `python -m layer_conformance new` writes
    dense_layout: str = ""


FRAMEWORKS = {f.name: f for f in (
    Framework("torch", "torch", ("torch",), ("torch.export", "torch.save", "state_dict"), ("torch",), 1,
              input_grad_flags="ctx.needs_input_grad[k]",
              dense_layout="torch holds an nn.Linear's `weight` as [out_features, in_features]: the layer computes "
                           "x @ weight.T"),
    Framework("tensorflow", "tensorflow", ("tensorflow", "tensorflow-cpu", "keras"), ("keras", "savedmodel"),
              ("tensorflow", "keras"), 3,
              dense_layout="Keras holds a Dense's `kernel` as [input_dim, units]: the layer computes x @ kernel"),
    Framework("jax", "flax", ("jax", "jaxlib", "flax"), ("jax.export", "nnx"), ("jax", "flax"), 0,
              dense_layout="Flax NNX holds a Linear's `kernel` as [in_features, out_features]: the layer computes "
                           "x @ kernel"),
    Framework("mxnet", "mxnet", ("mxnet",), ("gluon.export",), ("mxnet",), 2,
              dense_layout="Gluon holds a Dense's `weight` as [units, in_units]: the layer computes x @ weight.T"),
)}


def installed(name: str) -> bool:
    """Whether a framework can be imported here, without importing it (its marker module is findable)."""
    mod = FRAMEWORKS[name].module
    if mod in sys.modules:
        return True
    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False


def versions(name: str, python: str | None = None) -> dict[str, str]:
    """Installed versions of a framework's distributions, here or in another Python (an executor's)."""
    dists = FRAMEWORKS[name].dists
    if python:
        import json
        import subprocess
        code = ("import importlib.metadata as m, json, sys\nout = {}\nfor d in sys.argv[1:]:\n"
                "    try: out[d] = m.version(d)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
        try:
            done = subprocess.run([python, "-c", code, *dists], capture_output=True, text=True, timeout=60)
            return json.loads(done.stdout or "{}")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return {}
    import importlib.metadata
    out = {}
    for dist in dists:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out
