"""The sandbox's gaps found by a hostile pull-request author (layer_conformance.boundary.sandbox), each against a
real layer run through the public command line from a user's directory:

* a judge running as root gave the layer host root: it opened /proc/sys/kernel/core_pattern for writing (a pipe
  core handler runs as the host's root), with every capability of its user namespace;
* the shared directory was on the host's disk: 3 GiB went into it under --memory-limit 2;
* --keep-warm's shared directory kept one run's files for the next, even after ``warm --stop``, and the layer
  read the registry's port and token;
* every other job's top-level /tmp directory was mounted, read-only, into the sandbox.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.hostile.sandbox_layers import HAVE, LAYER, needs_sandbox  # noqa: E402
from tests.support import pytest_run  # noqa: E402

# the shared directory as the layer finds it: the last mount under /tmp that the judge's files come through (a
# holder's own mount, hidden under the private /tmp, is listed before it)
FIND_SHARED = """\
def _shared():
    points = [line.split()[4] for line in open("/proc/self/mountinfo")]
    points = [p for p in points if p.startswith("/tmp/conformance-sandbox-")]
    if not points:
        raise RuntimeError("no shared directory mounted")
    return points[-1]
"""


def _write(directory: Path, attack: str) -> None:
    (directory / "evil.py").write_text(LAYER + "\n    def attack(self):\n"
                                       + textwrap.indent(textwrap.dedent(attack), " " * 8) + "\n\n" + FIND_SHARED)


def _run(directory: Path, attack: str, *args, env=None, timeout=240):
    """The command line on a layer whose first forward runs ``attack``, from ``directory``: (process, the
    ``values`` record without a dtype of its own, or None)."""
    _write(directory, attack)
    out = directory / "results.json"
    if out.exists():
        out.unlink()
    proc = pytest_run("-n", "0", "--impl", "evil:Layer", "--contract", "rmsnorm", "--framework", "torch",
                      "--check", "values", "--conformance-json", str(out), *args, cwd=directory,
                      env={"PYTHONPATH": str(directory), **(env or {})}, timeout=timeout)
    doc = json.loads(out.read_text()) if out.exists() else None
    values = [r for r in (doc or {}).get("results", []) if r["check"] == "values" and not r.get("dtype")]
    return proc, (values[0] if values else None)


def _said(proc) -> str:
    return proc.stdout[-3000:] + proc.stderr[-3000:]


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="the judge is not root here")
def test_a_root_judges_layer_has_no_privilege_and_cannot_write_proc_sys(tmp_path):
    proc, record = _run(tmp_path, """\
        found = []
        for path in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
            try:
                os.close(os.open(path, os.O_WRONLY))   # opened, never written
                found.append(path + " opened for writing")
            except OSError:
                pass
        def status(pid):
            return dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)

        def caps(pid):
            return [f"{c} {status(pid)[c].strip()}" for c in ("CapPrm", "CapEff", "CapBnd", "CapAmb")
                    if int(status(pid)[c].strip(), 16)]

        def userns(pid):
            try:
                return os.readlink(f"/proc/{pid}/ns/user")
            except OSError:
                return None

        if status("self").get("NoNewPrivs", "0").strip() != "1":
            found.append("privileges can still be gained (NoNewPrivs 0)")
        # the zygote it was forked from holds no capability; nor does this process, unless in a user namespace of
        # its own (made for its network namespace: its capabilities there reach nothing of the sandbox's)
        parent = os.getppid()
        found += [f"the zygote's {c}" for c in caps(parent)]
        if userns("self") == userns(parent):
            found += caps("self")
        open("/tmp/mine", "w").close()
        try:
            os.chown("/tmp/mine", 1, 1)
            found.append("chown to another user succeeded")
        except OSError:
            pass
        try:
            os.setgroups([0, 1])
            found.append("setgroups succeeded")
        except OSError:
            pass
        if found:
            raise RuntimeError("PRIVILEGED: " + "; ".join(found))
    """)
    assert record is not None, _said(proc)
    assert record["outcome"] == "passed", record.get("message")
    assert proc.returncode == 0, _said(proc)


@needs_sandbox
def test_b_writing_past_the_memory_limit_into_the_shared_directory_is_stopped(tmp_path):
    def used() -> int:
        st = os.statvfs(tempfile.gettempdir())
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    before, peak, done = used(), [0], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], used() - before)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc, record = _run(tmp_path, """\
            shared, chunk = _shared(), b"x" * (8 << 20)
            for i in range(3 * 128):   # 3 GiB, 8 MiB at a time
                with open(os.path.join(shared, f"evil-hog-{i // 16}"), "ab") as f:
                    f.write(chunk)
        """, "--memory-limit", "0.5", timeout=300)
    finally:
        done.set()
        watcher.join()
    assert record is not None, _said(proc)
    assert record["outcome"] in ("error", "failed"), record
    if HAVE == "namespaces+cgroup":
        assert record["outcome"] == "error" and "memory limit" in record["message"], record
    else:   # the tmpfs is full at the limit: the layer's write fails
        assert "No space left on device" in record["message"], record
    assert proc.returncode != 0
    assert peak[0] < 1 << 30, f"{peak[0] / 2 ** 30:.1f} GiB went onto the disk of the host's /tmp"


@needs_sandbox
def test_c_another_jobs_tmp_directory_is_not_visible(tmp_path):
    other = Path(tempfile.mkdtemp(prefix="other-job-", dir="/tmp"))
    try:
        (other / "secret.txt").write_text("another job's file")
        proc, record = _run(tmp_path, """\
            seen = [p for p in (os.environ["OTHER_JOB"], os.environ["OTHER_JOB"] + "/secret.txt") if os.path.exists(p)]
            seen += [e for e in os.listdir("/tmp") if e.startswith("other-job-")]
            if seen:
                raise RuntimeError("ANOTHER JOB'S FILES: " + ", ".join(seen))
        """, env={"OTHER_JOB": str(other)})
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert record is not None, _said(proc)
    assert record["outcome"] == "passed", record.get("message")


# -- --keep-warm -------------------------------------------------------------------------------------------
def _warm(project, env, *args):
    return subprocess.run([sys.executable, "-m", "layer_conformance", "warm", *args], cwd=project,
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=60)


@pytest.fixture
def warm_user(tmp_path):
    """A user's directory, and a registry of its own inside it (where the layer could reach it, but for the
    sandbox); whatever the test kept is ended at its end."""
    project = tmp_path / "project"
    project.mkdir()
    env = {"XDG_CACHE_HOME": str(project / "cache")}
    yield project, env
    _warm(project, env, "--stop")


@needs_sandbox
def test_d_keep_warm_shared_directory_is_empty_at_the_next_run_and_after_warm_stop(warm_user):
    project, env = warm_user
    env = {**env, "EVIL_MARK": f"evil-leftover-{os.getpid()}-{time.time_ns()}"}   # this test's files alone
    first, record = _run(project, """\
        shared = _shared()
        open(os.path.join(shared, os.environ["EVIL_MARK"]), "w").write("from the first run")
        for top, dirs, files in os.walk(shared):
            if dirs:
                open(os.path.join(top, dirs[0], os.environ["EVIL_MARK"]), "w").write("from the first run")
                break
    """, "--keep-warm", env=env)
    assert record is not None and record["outcome"] == "passed", _said(first)
    second, record = _run(project, """\
        left = [os.path.join(top, f) for top, _, files in os.walk(_shared()) for f in files
                if f == os.environ["EVIL_MARK"]]
        if left:
            raise RuntimeError("LEFT BY THE FIRST RUN: " + ", ".join(left))
    """, "--keep-warm", env=env)
    assert record is not None, _said(second)
    assert record["outcome"] == "passed", record.get("message")
    assert "kept from an earlier run" in second.stdout, second.stdout[-2000:]   # the same zygote, its directory
    # a third run leaves its file; after warm --stop no file of it is anywhere under the host's /tmp
    third, record = _run(project, """\
        open(os.path.join(_shared(), os.environ["EVIL_MARK"]), "w").write("from the third run")
    """, "--keep-warm", env=env)
    assert record is not None and record["outcome"] == "passed", _said(third)
    stopped = _warm(project, env, "--stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    left = []
    for base in Path("/tmp").glob(f"conformance-sandbox-warm-{os.getuid()}*"):
        for top, _, files in os.walk(base, followlinks=True):
            left += [os.path.join(top, f) for f in files if f == env["EVIL_MARK"]]
    assert left == [], left


@needs_sandbox
def test_e_the_warm_registry_is_unreadable_from_the_layer(warm_user):
    project, env = warm_user
    proc, record = _run(project, """\
        registry = os.path.join(os.environ["XDG_CACHE_HOME"], "layer-conformance", "warm")
        found = []
        try:
            names = os.listdir(registry)
        except OSError:
            names = []
        for name in names:
            try:
                text = open(os.path.join(registry, name)).read()
            except OSError:
                continue
            if "token" in text:
                found.append(text)
        if found:
            raise RuntimeError("REGISTRY READ: " + " ".join(found))
    """, "--keep-warm", env=env)
    assert record is not None, _said(proc)
    assert record["outcome"] == "passed", record.get("message")
    # the registry is there for the judge, and holds the kept zygote's token
    registry = Path(env["XDG_CACHE_HOME"]) / "layer-conformance" / "warm"
    assert any("token" in p.read_text() for p in registry.glob("*.json")), list(registry.iterdir())


def test_a_relative_executor_python_starts_inside_the_sandbox():
    """scripts/conformance.sh's `--executor-python mxnet=.venv-mxnet/bin/python`: the sandbox starts executors from
    another directory, where a relative path named nothing, and every MXNet check was lost ("cannot send")."""
    from tests.support import MXNET_PYTHON, ROOT
    if not MXNET_PYTHON.exists():
        pytest.skip("no .venv-mxnet here")
    relative = MXNET_PYTHON.relative_to(ROOT)
    proc = pytest_run("-q", "--contract", "rmsnorm", "--framework", "mxnet", "--check", "values", "--dtype",
                      "float32", "--executor-python", f"mxnet={relative}", cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
