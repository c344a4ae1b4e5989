"""The judge's side of the process boundary: executors opened through execnet, each request sent and its answer
awaited under the check's deadline and the memory cap (the proxies that checks call are ``remote``'s; how a
process is started and watched from outside, ``process``'s; its stderr, ``stderr``'s).

The judge never imports a framework, a user module or a contract's reference module. It holds
each executor from outside: a check's time limit and the memory cap are enforced by killing the
executor's process, whose exit status means nothing (only answers count). A dead executor is
replaced for the next check; what it was running becomes an ``error`` for that check alone.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

from .. import import_paths, wire
from . import process
from . import sandbox as sandboxing
from .remote import Rebuild, Remote
from .stderr import StderrTail

STARTUP_TIMEOUT = 300.0  # seconds for an executor to import its framework and say hello
FORK_TIMEOUT = 60.0      # seconds for the zygote to fork a fresh executor
# execnet's socket bootstrap sends a class's source, which inspect finds by parsing its module (ast.parse); in
# CPython 3.11 the AST constructor's recursion counter is shared by all threads, and two threads building ASTs
# at once raise SystemError ("AST constructor recursion depth mismatch"): one bootstrap at a time
SOCKET_BOOTSTRAP = threading.Lock()
WARM_HELLO_TIMEOUT = 30.0  # seconds for a zygote kept from an earlier run (--keep-warm) to answer
STACK_WAIT = 1.0         # seconds a process at its deadline has to dump its stacks before it is killed
STACK_BYTES = 1 << 20    # the most of a stack dump read (a dump of a few hundred frames is some kB)
POLL = 0.05              # seconds between looks at a running executor (deadline, memory)


class CheckTimeout(BaseException):
    """A check ran past its time limit; its executor was killed. A BaseException, so that a
    check's ``except Exception`` cannot swallow it. ``place``: where the process was, or ""."""
    place = ""


class ExecutorLost(BaseException):
    """The executor's process ended without answering (crash, exit, kill by the memory cap)."""

    def __init__(self, message: str, out_of_memory: bool = False):
        super().__init__(message)
        self.message = message
        self.out_of_memory = out_of_memory


class RemoteError(Exception):
    """The code under test (or a framework call on its behalf) raised in the executor."""

    def __init__(self, info: dict, origin: str = "layer"):
        super().__init__(info.get("message", info["text"]))  # str() reads like the original exception
        self.type_name = info["type"]
        self.remote_text = info["text"]
        self.origin = origin
        self.missing_dependency = info.get("missing_dependency")  # layer_conformance.errors.missing_dependency, said there


class Executor:
    """One executor process: a framework's (``role`` "layer", "native", "fresh" or "zygote"), or numpy-only
    ("reference"). With ``zygote`` (a "zygote" executor: the framework imported, nothing else), the process
    is forked from it instead of started, and reached through an execnet socket gateway: a run imports each
    framework once, in its zygote."""

    def __init__(self, role: str, framework: str | None = None, python: str | None = None,
                 memory_limit_gib: float | None = None, zygote: Executor | None = None,
                 sandbox: str | None = None, keep_warm: float | None = None, user_reference: bool = False):
        self.role, self.framework = role, framework
        # (a "reference" executor) one of a user's reference module: it imports from the working directory
        self.user_reference = user_reference
        # (--sandbox) the namespaces and cgroup this executor's processes run in (sandbox.py)
        self.sandbox = sandboxing.sandbox(sandbox or sandboxing.MODE)
        self.group = None  # this process's cgroup, where there is one: killed with it
        self.host_pid: int | None = None  # its pid as the judge sees it (in its own PID namespace it is 1)
        self.zygote = zygote
        self.keep_warm = keep_warm  # (a zygote) --keep-warm's seconds: it outlives the run (boundary/warm.py)
        self.warm = None  # (a zygote) warm.Warm: the one kept between runs that this run holds
        self.forked_pid: int | None = None
        # absolute, without resolving links (a venv's python is one): the sandbox starts it from another directory
        self.python = os.path.abspath(python) if python and os.path.exists(python) else python or sys.executable
        self.memory_limit_gib = memory_limit_gib
        self.gateway = self.channel = None
        self.hello: dict = {}
        self.generation = 0
        self.next_id = 0
        self.handles: dict[int, Remote] = {}
        self.deadline: float | None = None
        self.started = 0  # how many processes this executor has had
        self.starting = None  # a Future while the process starts in the background (start_soon)
        self.begin_pending = False  # the next request opens a check (saves a round trip per check)
        self.stacks = None  # our descriptor of the file the process dumps its stacks into (a timeout names the place)
        self.stderr = StderrTail()  # the process's stderr, kept out of the terminal
        self._lock = threading.RLock()

    # -- life ----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        self._join()
        return self.channel is not None and not self.channel.isclosed()

    def start_soon(self):
        """Start the process on a background thread: its framework imports on an idle core while the
        judge does other work; the first request waits for it."""
        if self.starting is None and (self.channel is None or self.channel.isclosed()):
            self.starting = _starter().submit(self.start)

    def _join(self):
        starting, self.starting = self.starting, None
        if starting is not None:
            try:
                starting.result()
            except KeyboardInterrupt:
                # Ctrl-C or SIGTERM while this thread waited (never the start's own: signals reach the main
                # thread): the run ends; the start stays pending, so that the kill that follows ends its process
                self.starting = starting
                raise
            except BaseException:
                self.kill()  # a failed background start is retried in the open, and fails there with its reason

    def start(self):
        for _ in range(2):
            if self.role == "zygote" and self.keep_warm and self.warm is None:
                self.warm = self._take_warm()
            if self.warm is None:
                break
            try:
                return self._start()
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:
                # a kept zygote that does not serve (stopped, gone, or broken by an earlier run's layer) is
                # ended and forgotten, and a new one kept in its place; where that fails too, this run goes
                # on with a zygote of its own
                warm, self.warm = self.warm, None
                warm.forget()
                warm.release()
                if self.gateway is not None:
                    self._forget()
        self.keep_warm = None  # none could be had: this run's zygote ends with it
        return self._start()

    def _take_warm(self):
        """(--keep-warm) The zygote an earlier run kept for this one, or a new one that outlives this run; None
        where another run holds it, or one cannot be started."""
        import shlex
        from . import warm as warming
        name = warming.key(self.framework, self.python, self.memory_limit_gib, self.sandbox.describe(),
                           process.import_path(self.role) + import_paths.code_tree()
                           + [sandboxing.shared_dir() if self.sandbox.namespaces else ""])
        fd, info = warming.take(name)
        if fd is None:
            return None
        if info is not None:
            return warming.Warm(name, info, fd, reused=True)
        self.sandbox.use(self.memory_limit_gib)
        try:
            return warming.launch(name, self.framework, shlex.split(self.sandbox.command(process.own_paths_first(self.python),
                                                                                       self.role, process.reads())),
                                  self.keep_warm, fd)
        except Exception:
            os.close(fd)
            return None

    def _start(self):
        import execnet
        path = process.import_path(self.role, self.user_reference)
        self.hello, self.forked_pid, self.host_pid = {}, None, None
        self.sandbox.use(self.memory_limit_gib)
        self.gateway = self._gateway(execnet)
        self.channel = self.gateway.remote_exec("from layer_conformance.layerside.server import serve; serve(channel)")
        # the harness package must be importable before the config arrives: it sits on PYTHONPATH
        import tempfile
        self._close_stacks()
        self.stacks, stack_file = tempfile.mkstemp(prefix="conformance-stack-")
        stderr_file = self.stderr.open()
        self.channel.send({"user_path": path, "cwd": os.getcwd(), "framework": self.framework, "role": self.role,
                           "memory_limit_gib": self.memory_limit_gib, "stack_file": stack_file,
                           "stderr_file": stderr_file,
                           "sandbox": self.sandbox.describe() if self.sandbox.namespaces else None})
        self.started += 1
        self.handles.clear()
        try:
            # a kept zygote has imported its framework already: one that does not answer soon is given up
            reused = self.warm is not None and self.warm.reused
            msg = self._receive(time.monotonic() + (WARM_HELLO_TIMEOUT if reused else STARTUP_TIMEOUT),
                                starting=True)
        finally:
            # the process opened it before its hello: the name goes now, so that nothing is left behind by a
            # kill or a crash on either side; both keep their descriptors
            for name in (stack_file, stderr_file):
                with contextlib.suppress(OSError):
                    os.unlink(name)
        self.hello = msg["hello"]
        if self.warm is not None:
            self.host_pid = self.warm.host_pid(self.sandbox.namespaces)
        self._find_host_pid()
        self._limit_from_outside()

    def _gateway(self, execnet):
        """The execnet gateway to a new process: forked by the zygote, or (the zygote, the reference and probe
        executors) a process started now."""
        if self.zygote is not None:
            spec = self._fork()
            with SOCKET_BOOTSTRAP:
                return execnet.makegateway(spec)
        if self.warm is not None:
            if not self.warm.answers(self.sandbox.namespaces):
                raise ExecutorLost(f"the kept {self.framework} zygote (pid {self.warm.root_pid}) is stopped or gone")
            with SOCKET_BOOTSTRAP:
                return execnet.makegateway(f"socket=127.0.0.1:{self.warm.info['port']}//id={self.warm.info['token']}")
        python = process.own_paths_first(self.python)
        return execnet.makegateway(f"popen//python={self.sandbox.command(python, self.role, process.reads())}")

    def _fork(self) -> str:
        """A process forked by the zygote; the execnet spec that reaches it. The token, sent to the zygote
        alone, is the gateway's id: the child serves only a connection whose bootstrap carries it."""
        import secrets
        token = secrets.token_hex(16)
        for attempt in (1, 2):  # a zygote that died is started again, once
            self.zygote.deadline = time.monotonic() + FORK_TIMEOUT
            try:
                forked = self.zygote.request("fork", token=token)
                break
            except (ExecutorLost, CheckTimeout):
                self.zygote.kill()
                if attempt == 2:
                    raise
            finally:
                self.zygote.deadline = None
        self.forked_pid = forked["pid"]
        self._forked_in(self.zygote.pid)
        return f"socket=127.0.0.1:{forked['port']}//id={token}"

    def _forked_in(self, parent: int | None):
        """A process forked by ``parent`` (the zygote): its pid as
        the judge sees it, and its own cgroup, before it runs anything (it waits for the judge's connection)."""
        if self.sandbox.namespaces and parent:
            self.host_pid = sandboxing.host_pid(parent, self.forked_pid)
        self._join_group()

    def _find_host_pid(self):
        popen = getattr(getattr(self.gateway, "_io", None), "popen", None)
        if popen is not None and self.sandbox.namespaces:
            # started through unshare: the process is the child of unshare's child (pid 1 of its namespace)
            init = sandboxing.host_pid(popen.pid)
            self.host_pid = sandboxing.host_pid(init) if init else None
        if popen is not None:
            self._join_group()  # before any code under test: the hello comes before every request

    def _join_group(self):
        self._end_group()
        pid = self.pid
        if pid and self.sandbox.cgroup:
            group = self.sandbox.group(self.memory_limit_gib)
            if group is not None and not group.add(pid):
                group.kill()
                group = None
            self.group = group

    def _end_group(self):
        group, self.group = self.group, None
        if group is not None:
            group.kill()

    def _limit_from_outside(self):
        import resource
        gib, pid = self.memory_limit_gib, self.pid
        # pid is None while a namespaced process's host pid is unknown: its cgroup (if any) is the limit then
        if gib and pid and hasattr(resource, "prlimit") and hasattr(resource, "RLIMIT_DATA"):
            try:
                want = int(gib * 2 ** 30)
                resource.prlimit(pid, resource.RLIMIT_DATA, (want, want))
            except (OSError, ValueError):
                pass

    @property
    def pid(self) -> int | None:
        if self.host_pid:
            return self.host_pid
        if self.sandbox.namespaces:
            return None  # a pid it says is its namespace's, not the judge's
        return self.hello.get("pid") or self.forked_pid  # a forked process can be killed before its hello

    def _stop_starting(self):
        """A start still in progress in the background, which no one waits for now: one not begun is cancelled;
        one begun has its process ended from here, so that it fails at once instead of this thread waiting out
        a framework's import (seconds, at the end of a run that stopped early: a contract or usage error)."""
        starting = self.starting
        if starting is None or starting.done():
            return
        if starting.cancel():
            self.starting = None
            return
        end = time.monotonic() + 5
        while not starting.done() and time.monotonic() < end:
            popen = getattr(getattr(self.gateway, "_io", None), "popen", None)
            if popen is not None:   # a started process (a forked one answers within moments: waited for)
                with contextlib.suppress(Exception):
                    popen.kill()
                return
            time.sleep(0.01)

    def kill(self):
        """End the process from outside: SIGKILL cannot be caught, ignored or delayed. (A kept zygote that
        failed is ended too, and this run goes on with a zygote of its own.)"""
        if self.warm is None:
            self._stop_starting()
        self._join()  # a process still starting in the background is ended too
        if self.warm is not None:
            warm, self.warm = self.warm, None
            warm.forget()
            warm.release()
        if self.gateway is None:
            return
        popen = getattr(self.gateway._io, "popen", None)
        try:
            if popen is not None:
                popen.kill()
                popen.wait(timeout=10)
            elif self.pid:
                os.kill(self.pid, signal.SIGKILL)
        except Exception:
            pass
        self._end_group()  # every process the executor started, in its group, ends with it
        self._forget()

    def close(self):
        self._close_stacks()
        self.stderr.close()
        if self.warm is not None:
            self.leave()
            return
        self._stop_starting()
        self._join()
        if self.gateway is None:
            return
        try:
            if self.alive:
                self.channel.send(None)
        except Exception:
            pass
        self.kill()

    def leave(self):
        """(A kept zygote.) The run is over: the connection closes, the process waits for the next run."""
        with contextlib.suppress(BaseException):
            self._join()
        if self.gateway is not None:
            with contextlib.suppress(Exception):
                if self.alive:
                    self.channel.send(None)
            self._forget()
        if self.warm is not None:
            self.warm.release()

    def _forget(self):
        try:
            self.gateway.exit()
        except Exception:
            pass
        self.gateway = self.channel = None
        self.handles.clear()

    def ensure(self):
        if not self.alive:
            if self.gateway is not None:
                self.kill()
            self.start()

    # -- requests ---------------------------------------------------------------------------
    def request(self, op: str, **args):
        """Send one request and wait for its answer, watching the deadline and the memory cap. One request at
        a time: the reference executor and the zygotes serve the checks of both lanes (Session.lane)."""
        with self._lock:
            return self._request(op, **args)

    def _request(self, op: str, **args):
        waiting = time.monotonic()
        self.ensure()
        if self.deadline is not None:
            # a process still starting (queued behind others on the starter thread, or started now) is a framework
            # import that STARTUP_TIMEOUT bounds, not the check's time: the check's clock resumes once it is up
            self.deadline += time.monotonic() - waiting
        self.next_id += 1
        rid = self.next_id
        self.generation += 1
        msg = {"id": rid, "op": op, "args": wire.encode(args, self._handle_data)}
        if self.begin_pending:
            msg["begin"], self.begin_pending = True, False
            self.stderr.clear()
        try:
            self.channel.send(msg)
        except (OSError, EOFError, ValueError) as exc:  # the channel closed under us
            raise self._lost(f"the executor could not be reached ({exc})")
        while True:
            msg = self._receive(self.deadline)
            if isinstance(msg, dict) and msg.get("id") == rid:
                break
            # an answer to an older request (or a forged one) is never taken for this one
        if "raised" in msg:
            info = msg["raised"]
            if info.get("not_applicable"):  # n/a said in the executor (server.Server._describe): a claim
                raise self._claimed_not_applicable(info)
            raise RemoteError(info, origin=self.role)
        return wire.decode(msg["ok"], self._object_of)

    def _claimed_not_applicable(self, info: dict) -> Exception:
        """An executor's n/a as the judge takes it: NotApplicable for a reason of the catalogue that a process running
        code under test may give (the layer's nature, or a limit the judge knows of this framework); anything else
        (no code, an unknown one, the contract's, another framework's limit) is the layer's failure."""
        from ..check_catalog import NA_REASONS
        from ..protocol import NotApplicable, NotApplicablePart
        try:  # the process may send anything: what is not the typed n/a names no reason
            said = wire.decode(info["not_applicable"], lambda data: None)
        except Exception:
            said = None
        said = said if isinstance(said, NotApplicablePart) else NotApplicablePart(str(info["not_applicable"])[:200])
        reason, code = str(said.reason or "not applicable"), str(said.code or "")
        known = NA_REASONS.get(code)
        refused = ("it names no reason the harness knows" if known is None else
                   "only the judge says what the contract makes n/a" if known.source == "contract" else
                   f"{code!r} is not a limit of {self.framework}"
                   if known.source == "framework" and self.framework not in known.frameworks else None)
        if refused is None:
            return NotApplicable(reason, code=code)
        return RemoteError({**info, "text": f"the layer's process answered 'not applicable' ({reason}), which the "
                                            f"judge does not accept: {refused}"}, origin=self.role)

    def _receive(self, deadline: float | None, starting: bool = False):
        limit = self.memory_limit_gib
        while True:
            self.stderr.spill()
            wait = POLL if deadline is None else max(0.0, min(POLL, deadline - time.monotonic()))
            try:
                msg = self.channel.receive(timeout=wait)
                if self.group is not None and self.group.ran_out_of_memory:
                    raise self._out_of_memory()
                return msg
            except self.channel.TimeoutError:
                self._resume_if_stopped()
            except (EOFError, OSError) as exc:
                if self.group is not None and self.group.ran_out_of_memory:
                    raise self._out_of_memory() from exc
                raise self._lost(f"the executor process ended without answering ({self._exit_status()})") from exc
            except self.channel.RemoteError as exc:
                raise self._lost(f"the executor process failed: {str(exc).strip().splitlines()[-1:]}") from exc
            if deadline is not None and time.monotonic() >= deadline:
                place = "" if starting else self._place_it_hung()
                self.kill()
                if starting:
                    raise ExecutorLost(f"the {self.role} executor did not start within {STARTUP_TIMEOUT:g} s")
                timeout = CheckTimeout("the executor was killed from outside")
                timeout.place = place
                raise timeout
            if limit and self.pid and process.rss_gib(self.pid) > limit:
                self.kill()
                raise ExecutorLost(f"the process running the layer grew past the memory limit ({limit:g} GiB, "
                                   f"--memory-limit) and was killed", out_of_memory=True)
            if self.group is not None and self.group.ran_out_of_memory:
                raise self._out_of_memory()

    def _resume_if_stopped(self):
        """A process the judge waits on that was stopped (SIGSTOP from the layer: its own, or the zygote's from a
        target forked by it) is resumed at once, rather than its deadline waited out; a layer that stops it
        again and again still meets the deadline. A process stopped by a tracer (state "t") is left alone."""
        pid = self.pid
        if pid and sandboxing.process_state(pid) == "T":
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)

    def _out_of_memory(self) -> ExecutorLost:
        """The kernel killed a process of the executor's cgroup at its memory limit (the executor, or a process it
        started: /dev/shm and /tmp are counted too): the executor and its group end."""
        self.kill()
        return ExecutorLost(f"the processes running the layer grew past the memory limit "
                            f"({self.memory_limit_gib:g} GiB, --memory-limit, for the executor and every process "
                            f"it started) and were killed", out_of_memory=True)

    def _place_it_hung(self) -> str:
        """Where the process is, "(at file:line in function)", from the stacks it dumps on SIGUSR2 (the server
        registers faulthandler for it), read before it is killed; "" where it gives none (the signal blocked or
        ignored, no dump in time). The innermost frame of the thread answering the request that is neither the
        harness's nor the standard library's: the layer's, or the framework function it is stuck in."""
        if not self.pid or self.stacks is None:
            return ""
        try:
            os.kill(self.pid, signal.SIGUSR2)
        except OSError:
            return ""
        text, ended = "", time.monotonic() + STACK_WAIT
        while time.monotonic() < ended:
            time.sleep(0.05)
            try:  # the layer's process can write the file too: a bounded part is read
                now = os.pread(self.stacks, STACK_BYTES, 0).decode(errors="replace")
            except OSError:
                return ""
            if now and now == text:
                break  # written in one go from the signal handler: unchanged means done
            text = now
        return process.innermost_place(text)

    def _close_stacks(self):
        if self.stacks is not None:
            with contextlib.suppress(OSError):
                os.close(self.stacks)
            self.stacks = None

    def _exit_status(self) -> str:
        popen = getattr(getattr(self.gateway, "_io", None), "popen", None)
        code = None
        if popen is not None:
            try:
                code = popen.wait(timeout=5)
            except Exception:
                code = None
        if code is None and self.zygote is not None and self.forked_pid and self.zygote.alive:
            code = self._status_from_zygote()
        if code is None:
            return "exit status unknown"
        if popen is not None and self.sandbox.namespaces and 128 < code < 160:
            code = 128 - code  # the sandbox's pid 1 passes a signal on as 128 + its number
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def _status_from_zygote(self) -> int | None:
        """(A process the zygote forked.) Its parent, the zygote, collected how it ended."""
        zygote = self.zygote
        saved, zygote.deadline = zygote.deadline, time.monotonic() + 10
        try:
            return zygote.request("exit_status", pid=self.forked_pid)
        except (ExecutorLost, CheckTimeout, RemoteError):
            return None
        finally:
            zygote.deadline = saved

    def _lost(self, message: str) -> ExecutorLost:
        self._forget()
        return ExecutorLost(message)

    # -- handles -----------------------------------------------------------------------------
    def _handle_data(self, obj):
        if isinstance(obj, Remote):
            if obj.executor is not self:
                raise ValueError(f"{obj!r} belongs to another executor")
            return {"__h__": obj.hid}
        if isinstance(obj, Rebuild):
            return {"__rebuild__": wire.encode(obj.spec, self._handle_data)}
        raise TypeError(f"cannot send a {type(obj).__name__} to an executor")

    def _object_of(self, data: dict):
        hid = data["__h__"]
        handle = self.handles.get(hid)
        if handle is None:
            handle = self.handles[hid] = Remote(self, hid, data.get("type", "object"))
        handle.update(data.get("meta") or {})
        return handle

    def release(self, keep=()):
        keep_ids = {h.hid for h in keep}
        self.handles = {k: v for k, v in self.handles.items() if k in keep_ids}


_pool = None


def _starter():
    """One background thread that starts executors, one at a time (a framework import is CPU-bound)."""
    from concurrent.futures import ThreadPoolExecutor
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(1, thread_name_prefix="executor-start")
    return _pool


