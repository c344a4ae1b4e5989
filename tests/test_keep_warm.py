"""--keep-warm (issue 31): a framework's zygote outlives the run and serves the next one, owned by the user:
named in the output with how to stop it, ended by `python -m layer_conformance warm --stop` or after its time,
replaced when it does not answer; and without the flag nothing outlives a run. A kept zygote runs no code under
test: a layer's patch in one run never reaches the next. Each test has a registry of its own (XDG_CACHE_HOME),
and whatever it kept is ended at its end."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.hostile.crossing_layers import BROKEN, PATCHER
from tests.support import pytest_run

pytest.importorskip("torch")

KEPT = re.compile(r"the torch zygote \(pid (\d+), (kept from an earlier run|started by this run)\) stays running")


@pytest.fixture
def user(tmp_path):
    """A user's directory with the two layers, and an environment with a registry of its own; every process
    that outlives the test with this environment is ended (and the test fails where one should not have)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "patcher.py").write_text(PATCHER)
    (project / "broken.py").write_text(BROKEN)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    yield project, env
    _warm(project, env, "--stop")
    for pid in _ours(env):
        os.kill(pid, signal.SIGKILL)


def _run(project, env, impl, *extra):
    return pytest_run("--contract", "rmsnorm", "--framework", "torch", "--impl", impl, "--check", "values", "--dtype", "float64",
                      *extra, cwd=project, env=env)


def _warm(project, env, *args):
    return subprocess.run([sys.executable, "-m", "layer_conformance", "warm", *args], cwd=project,
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=60)


def _ours(env, within=5.0) -> list[int]:
    """The processes still running with this test's environment (executors inherit the judge's), after
    ``within`` seconds for those that are ending."""
    mark = f"XDG_CACHE_HOME={env['XDG_CACHE_HOME']}".encode()
    ends = time.monotonic() + within
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        with open(f"/proc/{entry}/stat") as s:
                            if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                                found.append(int(entry))
            except OSError:
                pass
        if not found or time.monotonic() > ends:
            return found
        time.sleep(0.1)


def test_a_kept_zygote_serves_the_next_run_and_ends_when_told(user):
    project, env = user
    first = _run(project, env, "patcher:Layer", "--keep-warm")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    kept = KEPT.search(first.stdout)
    assert kept and kept.group(2) == "started by this run", first.stdout[-2000:]
    assert "python -m layer_conformance warm --stop" in first.stdout   # how to stop it, in the output
    listed = _warm(project, env)
    assert f"torch zygote, pid {kept.group(1)}" in listed.stdout, listed.stdout
    # the next run forks from it; the patch the first run's layer made stayed in that run's own executor
    second = _run(project, env, "broken:BrokenNorm", "--keep-warm")
    assert second.returncode == 1, second.stdout[-3000:] + second.stderr[-3000:]
    assert "FAILED" in second.stdout and "::values" in second.stdout, second.stdout[-3000:]
    again = KEPT.search(second.stdout)
    assert again and again.groups() == (kept.group(1), "kept from an earlier run"), second.stdout[-2000:]
    stopped = _warm(project, env, "--stop")
    assert f"ended: torch zygote, pid {kept.group(1)}" in stopped.stdout, stopped.stdout
    assert _ours(env) == []
    assert "no zygote is kept running" in _warm(project, env).stdout


def test_without_the_flag_nothing_outlives_the_run(user):
    project, env = user
    done = _run(project, env, "patcher:Layer")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "stays running" not in done.stdout
    assert _ours(env) == []


def test_a_kept_zygote_ends_after_its_time(user):
    project, env = user
    done = _run(project, env, "patcher:Layer", "--keep-warm", "--keep-warm-for", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ends after 2 s without one" in done.stdout
    assert _ours(env, within=15.0) == []


def test_a_kept_zygote_that_does_not_answer_is_replaced(user):
    project, env = user
    first = _run(project, env, "patcher:Layer", "--keep-warm")
    old = int(KEPT.search(first.stdout).group(1))
    for pid in _ours(env, within=0):
        os.kill(pid, signal.SIGSTOP)  # the zygote and its sandbox's processes: stopped, not gone
    second = _run(project, env, "patcher:Layer", "--keep-warm")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    new = KEPT.search(second.stdout)
    assert new and new.group(2) == "started by this run" and int(new.group(1)) != old, second.stdout[-2000:]
    try:   # the stopped one was ended: gone, or a zombie of its own parent
        with open(f"/proc/{old}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        pass


def test_keep_warm_for_without_keep_warm_is_a_usage_error(user):
    project, env = user
    done = _run(project, env, "patcher:Layer", "--keep-warm-for", "5")
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "--keep-warm-for is the time a kept zygote waits: give it with --keep-warm" in done.stderr


def test_warm_lists_nothing_where_nothing_is_kept_and_a_zygote_serves_only_its_own_setting(tmp_path, monkeypatch):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    listed = _warm(tmp_path, env)
    assert listed.returncode == 0 and "no zygote is kept running" in listed.stdout, listed.stdout + listed.stderr
    assert oct((tmp_path / "cache" / "layer-conformance" / "warm").stat().st_mode & 0o777) == "0o700"
    from layer_conformance.boundary import warm
    base = warm.key("torch", sys.executable, 8, "namespaces", ["a"])
    assert base == warm.key("torch", sys.executable, 8, "namespaces", ["a"])
    others = {warm.key("jax", sys.executable, 8, "namespaces", ["a"]),
              warm.key("torch", sys.executable, 4, "namespaces", ["a"]),
              warm.key("torch", sys.executable, 8, "none: --sandbox off", ["a"]),
              warm.key("torch", sys.executable, 8, "namespaces", ["b"])}
    monkeypatch.chdir(tmp_path)
    others.add(warm.key("torch", sys.executable, 8, "namespaces", ["a"]))   # another working directory
    assert base not in others and len(others) == 5
