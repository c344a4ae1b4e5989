"""A binding's options reach every check and every process, and every reproduction command; a contract
argument the layer's constructor does not take is a usage error unless the run maps or drops it; a binding
that does not fit its layer is one usage error, said once, before any check runs (exit 4). Run the user's
way: a directory of their own, a small layer, the public command line in a subprocess."""
import json
import re
import shlex
import sys
import textwrap

import pytest

from tests.support import pytest_run, torch_rmsnorm

pytest.importorskip("torch")

# an RMSNorm whose constructor argument and slot have names of its own (dim, weight)
TORCH_LAYER = torch_rmsnorm(d="dim", gain="weight") + textwrap.dedent("""\


    class FixedEps(RMSNorm):
        # eps is fixed here: the contract's eps is dropped explicitly
        def __init__(self, dim):
            super().__init__(dim, eps=1e-6)
""")

# broken twice over: its gain starts at two (parameters fails), and it halves its output in bfloat16 alone
BROKEN_LAYER = TORCH_LAYER + textwrap.dedent("""\

    class Broken(RMSNorm):
        def __init__(self, dim, eps=1e-6):
            super().__init__(dim, eps)
            nn.init.constant_(self.weight, 2.0)

        def forward(self, x):
            y = super().forward(x)
            return y * 0.5 if x.dtype == torch.bfloat16 else y
""")

KERAS_LAYER = textwrap.dedent("""\
    import keras
    from keras import ops

    class RMSNorm(keras.layers.Layer):
        def __init__(self, d, epsilon=1e-5, **kwargs):
            super().__init__(**kwargs)
            self.d, self.epsilon = d, epsilon

        def build(self, input_shape):
            self.gain = self.add_weight(shape=(self.d,), initializer="ones", name="gain")

        def call(self, x):
            return self.gain * x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
""")


def run(cwd, *args, layer=TORCH_LAYER):
    (cwd / "mylayer.py").write_text(layer)
    out = cwd / "results.json"
    proc = pytest_run("-q", "-n", "0", f"--conformance-json={out}", *args, cwd=cwd, timeout=600)
    records = json.loads(out.read_text())["results"] if out.exists() else []
    return proc, records


def html_data(path):
    html = path.read_text()
    return json.loads(re.search(r'<script type="application/json" id="conformance-data">(.*?)</script>', html,
                                re.S).group(1))


ROW = ("contract", "impl", "framework", "device", "check", "dtype", "outcome")


def test_export_builds_the_layer_in_the_fresh_process_under_the_mapped_arguments(tmp_path):
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--arg-map", "d=dim",
                        "--check", "export", "--dtype", "float32")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [(r["check"], r["outcome"]) for r in records] == [("export", "passed")], records


def test_a_binding_that_does_not_fit_is_one_usage_error_said_once(tmp_path):
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm")   # every default check
    said = proc.stdout + proc.stderr
    assert proc.returncode == 4, said[-3000:]
    assert said.count("cannot be built from the contract's constructor arguments") == 1, said[-3000:]
    assert "--arg-map d=dim" in said
    assert not any(r["outcome"] in ("failed", "error") for r in records)   # no check is blamed for it


def test_an_argument_mapped_to_nothing_is_dropped(tmp_path):
    (tmp_path / "bindings.yaml").write_text(
        '- {contract: rmsnorm, impl: "mylayer:FixedEps", arg_map: {d: dim, eps: null}}\n')
    proc, records = run(tmp_path, "--bindings", "bindings.yaml", "--check", "values", "--dtype", "float32")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [r["outcome"] for r in records] == ["passed"]
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:FixedEps", "--arg-map", "d=dim",
                        "--arg-map", "eps=", "--check", "values", "--dtype", "float32")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [r["outcome"] for r in records] == ["passed"]


def test_a_contract_argument_the_keras_constructor_does_not_take_is_a_usage_error(tmp_path):
    pytest.importorskip("keras")
    # __init__(self, d, epsilon=1e-5, **kwargs) passes **kwargs to keras's Layer, which takes no eps
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--check", "values",
                        layer=KERAS_LAYER)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 4, said[-3000:]
    assert said.count("the contract's 'eps' is not a parameter of it") == 1, said[-3000:]
    assert "its parameters: 'd', 'epsilon'" in said and "--arg-map eps=epsilon" in said and "--arg-map eps=" in said
    assert records == []
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--check", "values",
                        "--dtype", "float32", "--arg-map", "eps=epsilon", layer=KERAS_LAYER)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert [r["outcome"] for r in records] == ["passed"]


def test_each_reproduction_command_reruns_exactly_its_row(tmp_path):
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:RMSNorm", "--arg-map", "d=dim",
                        "--state-map", "gain=weight", "--check", "values", "--check", "parameters",
                        "--dtype", "bfloat16", "--conformance-html", "report.html")
    assert proc.returncode == 0, proc.stdout[-3000:]
    rows = {(c["check"], c["dtype"]): c["repro"] for c in html_data(tmp_path / "report.html")["checks"]}
    assert set(rows) == {("values", ""), ("parameters", ""), ("values", "bfloat16")}
    ran = {(r["check"], r.get("dtype", "")): r for r in records}   # "" (the cases' own) is left out
    for row, command in rows.items():
        args = shlex.split(command)
        assert args[0] == "pytest" and "--arg-map" in args and "--state-map" in args, command
        again, produced = run(tmp_path, *args[1:])
        assert again.returncode == 0, (command, again.stdout[-3000:])
        assert [{k: r.get(k, "") for k in ROW} for r in produced] == [{k: ran[row].get(k, "") for k in ROW}], command


def test_each_failure_in_the_terminal_ends_with_the_command_that_reruns_exactly_its_row(tmp_path):
    # the run's options that change a verdict ride along: a seed not the default, the compile backend, the
    # framework's executor Python, and the limits a check runs under
    options = ["--seed", "3", "--compile-backend", "aot_eager", "--executor-python", f"torch={sys.executable}",
               "--check-timeout", "90", "--memory-limit", "6", "--max-input-elements", "500000"]
    proc, records = run(tmp_path, "--contract", "rmsnorm", "--impl", "mylayer:Broken", "--arg-map", "d=dim",
                        "--state-map", "gain=weight", "--check", "values", "--check", "parameters",
                        "--dtype", "bfloat16", *options, "--conformance-html", "report.html", layer=BROKEN_LAYER)
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = {(r["check"], r.get("dtype", "")): r for r in records if r["outcome"] == "failed"}
    assert set(failed) == {("parameters", ""), ("values", "bfloat16")}, records
    # the failures' own reports (under CI pytest's short summary repeats each report whole)
    commands = re.findall(r"^reproduce: (.*)$", proc.stdout.split("short test summary info")[0], re.M)
    assert len(commands) == len(failed), proc.stdout[-3000:]   # one per failure, none for what passed
    # the HTML report says the same command for each row (one builder)
    html = {(c["check"], c["dtype"]): c["repro"] for c in html_data(tmp_path / "report.html")["checks"]}
    assert sorted(commands) == sorted(html[row] for row in failed)
    for command in commands:
        args = shlex.split(command)
        assert args[0] == "pytest" and all(o in args for o in options), command
        again, produced = run(tmp_path, *args[1:], layer=BROKEN_LAYER)
        assert again.returncode == 1, (command, again.stdout[-3000:])
        assert len(produced) == 1, (command, produced)   # exactly that row
        (rec,) = produced
        assert {k: rec.get(k, "") for k in ROW} == {k: failed[rec["check"], rec.get("dtype", "")].get(k, "")
                                                     for k in ROW}, command
        assert rec["message"] == failed[rec["check"], rec.get("dtype", "")]["message"], command
        reports = again.stdout.split("short test summary info")[0]
        assert reports.count("reproduce: ") == 1 and f"reproduce: {command}" in reports, command
