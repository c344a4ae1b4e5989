"""The judge's executors for one run: per framework a zygote, which imports the framework and runs
nothing, and, forked from it, one executor for the layers under test, one for the framework's native
layers and the fresh processes some checks need; and one numpy-only executor for the contracts' references.

A run imports each framework once, in its zygote: every other executor of the framework is a fork of it,
as fresh as a process started then, without the seconds of the import. Each implementation under test gets
a layer executor of its own, so no process that ran one target's code runs another's. Within a target, what
a module or a check changes in global state is undone and noted.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time

from .. import protocol
from .client import CheckTimeout, Executor, ExecutorLost, RemoteError
from .remote import RemoteAdapter, RemoteModule
from .stderr import stderr_tail

LOAD_TIMEOUT = 120.0  # seconds to import a user module (a framework import can take most of it)


class LoadFailed(Exception):
    """The implementation under test could not be imported; every check of its target says why."""


class CodeChanged(ExecutorLost):
    """The code under test changed the executor's own code (layerside/fingerprint.py), or the executor could not
    say whether it did: the check's answers came from code the harness no longer vouches for, and it is an error.
    An ``ExecutorLost``: the process is killed, and the next check gets a fresh one."""


OWN_CODE_SHOWN = 5  # the most changes of the executor's code one message names


def own_code_changed(said) -> list[str]:
    """What an executor says of its own code (``server.Server.op_code``) as phrases for the judge's message:
    an answer that is not a list of phrases is itself a change (a process that lies has replaced the code that
    answers). Each phrase is cut to 300 characters."""
    if not isinstance(said, list):
        return [f"its end-of-check answer says nothing of its code ({type(said).__name__})"]
    return [(s if isinstance(s, str) else repr(s))[:300] for s in said]


def own_code_message(found: list[str], unanswered: str | None = None) -> str:
    """The check's error: what was changed, and (``unanswered``) why the executor did not answer the end of the
    check."""
    if not found:
        return f"the layer's executor did not answer the end of the check ({unanswered}), so its own code cannot " \
               f"be vouched for"
    more = f" and {len(found) - OWN_CODE_SHOWN} more" if len(found) > OWN_CODE_SHOWN else ""
    also = f" (and it did not answer the end of the check: {unanswered})" if unanswered else ""
    return "the executor's own code was changed by the code under test: " + "; ".join(found[:OWN_CODE_SHOWN]) + \
        more + also


class UsageProblem(LoadFailed):
    """The binding does not fit the implementation (its constructor cannot take the contract's
    arguments): the user's to fix on the command line, not a layer failure (exit 4)."""


class Session:
    def __init__(self, pythons: dict | None = None, memory_limit_gib: float | None = None,
                 sandbox: str | None = None, keep_warm: float | None = None):
        self.pythons = dict(pythons or {})
        self.keep_warm = keep_warm  # --keep-warm: seconds each zygote waits for the next run after this one
        self.memory_limit_gib = memory_limit_gib
        self.sandbox = sandbox  # --sandbox (auto, require, off; None: the process's, sandbox.MODE)
        self.layer: dict[str, Executor] = {}
        self.native: dict[str, Executor] = {}
        self.reference_layers: dict[str, Executor] = {}  # framework -> the executor of a `reference: {impl}`
        self.reference_loaded: dict = {}  # (framework, spec) -> (process number, impl handle)
        self.loaded: dict = {}        # (framework, spec) -> (process number, impl handle, notes)
        self.failed: dict = {}        # (framework, spec) -> why it cannot be loaded
        self.usage: dict = {}         # ((framework, spec), constructor) -> why the binding does not fit
        self.current: dict = {}       # framework -> spec of the target its executor holds
        self.running: list[Executor] = []  # the current check's executors (its fresh ones stay, closed, to its end)
        self.stderr_tail = ""  # what the code under test wrote to stderr in the last check (bounded)
        self.zygotes: dict[str, Executor] = {}  # framework -> the process its other executors are forked from
        self.compiled_in: dict = {}   # (framework, spec) -> the target's own compilation cache directory
        self._cache_root = None
        self._native_generation = None
        self.owner: Session | None = None  # (a lane) the session whose zygotes and caches it shares
        # (framework, spec) -> the files its processes saw the code under test load (server.FileRecorder), for
        # the results file's `loaded_files`; ``files_cut``: the keys whose list reached the recorder's cap
        self.loaded_files: dict = {}
        self.files_cut: set = set()

    # -- executors ---------------------------------------------------------------------------
    def lane(self) -> Session:
        """A second set of layer executors, for checks that run on a thread alongside this session's (with -n 0
        the longest checks, compiled and export, use the core the others leave idle). It shares this session's
        zygotes (they never run code under test) and each target's compilation cache directory (the same
        target's processes either way); it has no native executors (those checks use none)."""
        side = Session(self.pythons, self.memory_limit_gib, self.sandbox)
        side.owner = self
        side.zygotes, side.compiled_in = self.zygotes, self.compiled_in
        side._cache_root = self._cache_root_dir()
        return side

    def _cache_root_dir(self) -> str:
        if self._cache_root is None:
            self._cache_root = tempfile.mkdtemp(prefix="conformance-compiled-")
        return self._cache_root

    def _executor(self, table, role, framework):
        with _tables:  # the lane's thread and the main thread share the zygotes' table
            return self._executor_unlocked(table, role, framework)

    def _executor_unlocked(self, table, role, framework):
        if framework not in table:
            zygote = None if role == "zygote" else self._executor_unlocked(self.zygotes, "zygote", framework)
            table[framework] = Executor(role, framework, self.pythons.get(framework), self.memory_limit_gib,
                                        zygote=zygote, sandbox=self.sandbox,
                                        keep_warm=self.keep_warm if role == "zygote" else None)
        return table[framework]

    @property
    def references(self) -> list[Executor]:
        return reference_executors()

    def adapter(self, framework: str) -> RemoteAdapter:
        layer = self._executor(self.layer, "layer", framework)
        layer.ensure()
        if self.owner is not None:  # a lane: no native layers
            return RemoteAdapter(layer, None)
        native = self._executor(self.native, "native", framework)
        native.start_soon()  # most contracts have a native layer; its fork overlaps the first checks
        return RemoteAdapter(layer, native)

    def prestart(self, frameworks, forks: bool = True):
        """Start the executors these frameworks need, in this order, on a background thread: each framework's
        zygote (its import), then (``forks``) its layer and native executors."""
        for framework in frameworks:
            self._executor(self.zygotes, "zygote", framework).start_soon()
        for framework in frameworks if forks else ():
            self._executor(self.layer, "layer", framework).start_soon()
            self._executor(self.native, "native", framework).start_soon()

    def fresh_adapter(self, framework: str):
        """A context manager: an adapter on a brand-new executor that has imported nothing of the code
        under test (what a deployment that loads a saved layer sees), closed on exit. It runs under the
        current check's deadline, and is one process per use (the export check: one per check).

        The process is forked from the framework's zygote, which imported the framework (and the modules
        its loaders need) and has run nothing: as fresh as a process started now, without the seconds of
        its import."""
        layer = self.layer.get(framework)
        return fresh_adapter(framework, self.pythons.get(framework), self.memory_limit_gib, sandbox=self.sandbox,
                             deadline=layer.deadline if layer is not None else None, running=self.running,
                             zygote=self._executor(self.zygotes, "zygote", framework),
                             cache=self.compiled_in.get((framework, self.current.get(framework))))

    def _compilation_cache(self, ex: Executor, key) -> None:
        """Point the layer executor at the target's own compilation cache (where its framework has one).
        One directory per target: what one target's code wrote is never read for another's verdict."""
        if "compilation_cache" not in ex.hello.get("implements", ()):
            return
        if key not in self.compiled_in:
            # a name no one can guess or take first (mkdtemp makes it atomically, mode 0700)
            self.compiled_in[key] = tempfile.mkdtemp(dir=self._cache_root_dir())
        if getattr(ex, "compiling_into", None) != (ex.started, self.compiled_in[key]):
            ex.request("call", request=protocol.request("compilation_cache", self.compiled_in[key]))
            ex.compiling_into = (ex.started, self.compiled_in[key])

    # -- targets -------------------------------------------------------------------------------
    def load(self, framework: str, spec: str, constructor: dict | None = None):
        """The implementation's handle in a clean layer executor, and what its import changed.
        With ``constructor`` (a layer contract), a constructor that cannot take those arguments is a
        usage problem."""
        key = (framework, spec)
        if key in self.failed:
            raise LoadFailed(self.failed[key])
        if (key, repr(constructor)) in self.usage:
            raise UsageProblem(self.usage[(key, repr(constructor))])
        ex = self._executor(self.layer, "layer", framework)
        if self.current.get(framework) not in (None, spec):
            # Another implementation ran in this process: each gets a process of its own, forked from the
            # framework's zygote (which has run no code under test), so that nothing one target patched,
            # started or left behind can reach the next one's verdict, whatever a fingerprint would see.
            ex.kill()
        ex.ensure()
        self.current[framework] = spec
        ex.deadline = time.monotonic() + LOAD_TIMEOUT
        try:
            self._compilation_cache(ex, key)
        except (RemoteError, ExecutorLost, CheckTimeout):
            pass  # only a saving: without it the target's processes compile everything themselves
        finally:
            ex.deadline = None
        cached = self.loaded.get(key)
        if cached and cached[0] == ex.started and ex.alive and cached[3] == repr(constructor):
            return cached[1], cached[2]
        ex.deadline = time.monotonic() + LOAD_TIMEOUT
        try:
            info = ex.request("load", spec=spec, constructor=constructor)
        except RemoteError as exc:
            self.failed[key] = f"cannot import {spec}: {exc.remote_text}"
            raise LoadFailed(self.failed[key]) from None
        except (ExecutorLost, CheckTimeout) as exc:
            what = "took longer than {:g} s".format(LOAD_TIMEOUT) if isinstance(exc, CheckTimeout) else str(exc)
            self.failed[key] = f"importing {spec} ended its executor: {what}"
            raise LoadFailed(self.failed[key]) from None
        finally:
            ex.deadline = None
        self._note_files(key, info)
        notes = []
        if info["changed"]:
            notes.append("importing the module changed global state (restored): " + ", ".join(info["changed"]))
        if info["threads"]:
            notes.append(f"importing the module left thread(s) running: {', '.join(info['threads'])}")
        if info.get("constructor_problem"):
            self.usage[(key, repr(constructor))] = info["constructor_problem"]
            raise UsageProblem(info["constructor_problem"])
        self.loaded[key] = (ex.started, info["impl"], notes, repr(constructor))
        return info["impl"], notes

    def reference_impl(self, framework: str, spec: str):
        """(adapter, handle) of a contract's ``reference: {impl}`` in an executor of its own (a layer executor of
        ``framework``, forked from its zygote, that never runs the layer under test). LoadFailed where it cannot
        be imported: the contract's problem."""
        ex = self._executor(self.reference_layers, "layer", framework)
        ex.ensure()
        cached = self.reference_loaded.get((framework, spec))
        if cached and cached[0] == ex.started and ex.alive:
            return RemoteAdapter(ex, None), cached[1]
        saved, ex.deadline = ex.deadline, time.monotonic() + LOAD_TIMEOUT
        try:
            info = ex.request("load", spec=spec, constructor=None)
        except RemoteError as exc:
            raise LoadFailed(f"the contract's reference {spec} ({framework}) cannot be imported: "
                             f"{exc.remote_text}") from None
        except (ExecutorLost, CheckTimeout) as exc:
            raise LoadFailed(f"importing the contract's reference {spec} ({framework}) ended its executor: "
                             f"{exc}") from None
        finally:
            ex.deadline = saved
        if ex not in self.running:
            self.running.append(ex)  # under the check's deadline, released at its end
        self.reference_loaded[(framework, spec)] = (ex.started, info["impl"])
        return RemoteAdapter(ex, None), info["impl"]

    # -- one check ----------------------------------------------------------------------------
    def begin_check(self, framework: str, timeout: float | None):
        deadline = time.monotonic() + timeout if timeout else None
        self.running = [e for e in (self.layer.get(framework), self.native.get(framework),
                                    *self.reference_layers.values()) if e]
        self.stderr_tail = ""
        for ex in self.running:
            ex.deadline = deadline
        references_until(deadline)  # a reference executor the check starts runs under it too
        layer = self.layer.get(framework)
        if layer is not None:
            layer.begin_pending = True  # sent with the check's first request: the layer cannot run before it
        native = self.native.get(framework)
        self._native_generation = native.generation if native is not None else None

    def end_check(self, framework: str) -> list[str]:
        """Close the check: global state restored in its executors, and notes of what the layer changed. Raises
        ``CodeChanged`` where the code under test changed the executor's own code, or the layer's executor did
        not answer the end of the check (a process that ran the layer and cannot say its code is intact)."""
        notes = []
        code: list[str] = []  # what of the executor's own code the code under test changed
        unanswered = None  # why the layer's executor gave no end-of-check answer
        layer = self.layer.get(framework)
        self.stderr_tail = stderr_tail(e for e in self.running if not (e is layer and layer.begin_pending))
        try:
            if layer is not None and layer.begin_pending:
                layer.begin_pending = False  # no request in this check: nothing of the layer ran
            elif layer is not None and layer.alive:
                try:
                    info = layer.request("end_check")
                except (ExecutorLost, CheckTimeout, RemoteError) as exc:
                    unanswered = f"{exc.type_name}: {exc}" if isinstance(exc, RemoteError) else str(exc)
                    if isinstance(exc, RemoteError):  # the process is there: what it says of its code names the patch
                        with contextlib.suppress(ExecutorLost, CheckTimeout, RemoteError):
                            code += own_code_changed(layer.request("code"))
                    raise
                code += own_code_changed(info.get("code") if isinstance(info, dict) else None)
                self._note_files((framework, self.current.get(framework)), info)
                if info["changed"]:
                    notes.append("the layer changed global state (restored): " + ", ".join(info["changed"]))
                if info["threads"]:
                    notes.append(f"the layer left thread(s) running: {', '.join(info['threads'])}; the next "
                                 f"target gets a fresh process")
            native = self.native.get(framework)
            if native is not None and native.generation != self._native_generation and native.alive:
                native.request("release")  # only where this check used it
        except (ExecutorLost, CheckTimeout, RemoteError) as exc:
            notes.append(f"the executor could not be reset after the check ({exc}); it is replaced")
            if layer is not None:
                layer.kill()
        finally:
            for ex in self.running:
                if ex.role == "fresh":  # what the check's fresh processes loaded (fresh_adapter asked as they closed)
                    self._note_files((framework, self.current.get(framework)), getattr(ex, "files", None) or {})
                    code += getattr(ex, "code_changes", None) or []
            references_until(None)
            for ex in self.running + self.references:
                ex.deadline = None
                keep = [h for k in [*self.loaded.values(), *self.reference_loaded.values()] for h in [k[1]]
                        if getattr(h, "executor", None) is ex]
                ex.release(keep)
            self.running = []
        if code or unanswered:
            if layer is not None:
                layer.kill()  # a process the harness no longer vouches for: the next check gets a fresh one
            raise CodeChanged(own_code_message(code, unanswered))
        return notes

    def _note_files(self, key, answer: dict) -> None:
        """The files an executor's answer says the code under test loaded (server.FileRecorder), kept per target."""
        files = answer.get("files") if isinstance(answer, dict) else None
        if isinstance(files, list):
            self.loaded_files.setdefault(key, set()).update(f for f in files if isinstance(f, str))
        if isinstance(answer, dict) and answer.get("files_truncated"):
            self.files_cut.add(key)

    def abort(self):
        """Kill every executor at once (the run is being interrupted), a fresh one in use included."""
        shared = [] if self.owner is not None else list(self.zygotes.values())  # a lane's zygotes are its owner's
        if self.owner is None:
            shared += reference_executors()
        for ex in [*self.layer.values(), *self.native.values(), *self.reference_layers.values(), *self.running,
                   *shared]:
            if ex is not None and ex.warm is not None:
                ex.leave()  # a kept zygote runs no check: it waits for the next run
            elif ex is not None:
                ex.kill()

    def kept(self) -> list[dict]:
        """The zygotes this run keeps for the next (--keep-warm): {"framework", "pid", "reused", "idle_s"}."""
        return [{"framework": fw, "pid": z.warm.root_pid, "reused": z.warm.reused, "idle_s": z.warm.info["idle_s"]}
                for fw, z in sorted(self.zygotes.items()) if z.warm is not None]

    def close(self):
        own = [] if self.owner is not None else list(self.zygotes.values())
        for ex in list(self.layer.values()) + list(self.native.values()) + list(self.reference_layers.values()) + own:
            ex.close()
        if self._cache_root is not None and self.owner is None:
            shutil.rmtree(self._cache_root, ignore_errors=True)


@contextlib.contextmanager
def fresh_adapter(framework: str, python: str | None = None, memory_limit_gib: float | None = None,
                  deadline: float | None = None, running: list | None = None, zygote: Executor | None = None,
                  cache: str | None = None, sandbox: str | None = None):
    """An adapter on a new executor process of ``framework`` (see ``Session.fresh_adapter``), forked from
    ``zygote`` where one is given, else started; ``cache``: the target's compilation cache directory."""
    ex = Executor("fresh", framework, python, memory_limit_gib, zygote=zygote, sandbox=sandbox)
    try:
        ex.start()
        ex.deadline = deadline
        if running is not None:
            running.append(ex)  # end_check clears its deadline with the others, and reads its stderr
        if cache is not None and "compilation_cache" in ex.hello.get("implements", ()):
            try:
                ex.request("call", request=protocol.request("compilation_cache", cache))
            except RemoteError:
                pass  # only a saving (a lost or late process is the check's to report, at its next request)
        yield RemoteAdapter(ex)
    finally:
        if ex.alive and (ex.deadline is None or time.monotonic() < ex.deadline):
            try:
                ex.files = ex.request("files")  # what the code under test loaded here (Session.end_check keeps it)
            except (RemoteError, ExecutorLost, CheckTimeout):
                pass
            try:  # what it changed of its own code (Session.end_check makes the check an error for it)
                ex.code_changes = own_code_changed(ex.request("code"))
            except (RemoteError, ExecutorLost, CheckTimeout) as exc:
                ex.code_changes = [f"the check's fresh executor did not say whether its code is intact ({exc})"]
        ex.close()  # its stderr stays readable for end_check


class Probe:
    """Throwaway executors that import the code under test to say what it is before any check runs (its
    framework, its module's file, its constructor's signature): one per Python for all of a run's bindings,
    replaced where an import ended it."""

    def __init__(self, zygote_of=None):
        self.executors: dict = {}
        self.zygote_of = zygote_of  # framework -> the run's zygote of it, or None: a probe of a known framework
        # is forked from it (no import of its own; the zygote is needed for the checks anyway)

    def detect(self, spec: str, python: str | None = None, timeout: float = LOAD_TIMEOUT,
               framework: str | None = None) -> dict:
        zygote = self.zygote_of(framework) if framework and self.zygote_of else None
        ex = self.executors.get((python, zygote is not None and framework))
        if ex is None or not ex.alive:
            ex = self.executors[(python, zygote is not None and framework)] = Executor("probe", framework if zygote
                                                                                     else None, python, zygote=zygote)
            ex.start()
        ex.deadline = time.monotonic() + timeout
        try:
            return ex.request("detect", spec=spec)
        except CheckTimeout:
            ex.kill()  # still importing: the next binding gets a new process
            raise
        finally:
            ex.deadline = None

    def close(self):
        for ex in self.executors.values():
            ex.close()
        self.executors.clear()


def detect(spec: str, python: str | None = None, timeout: float = LOAD_TIMEOUT) -> dict:
    """Which framework ``module:attr`` belongs to, asked of a throwaway executor that imports it."""
    probe = Probe()
    try:
        return probe.detect(spec, python, timeout)
    finally:
        probe.close()


# The numpy-only executors that run the contracts' reference modules, per thread of this judge process that
# runs checks (the main thread; with -n 0 the lane's too), so that a check's deadline is its own. The bundled
# references share one; a user's reference module gets one of its own, so that what it does at import or in a
# call (rewrite another reference's functions) never reaches another contract's verdict.
_references: dict[tuple, Executor] = {}
_deadlines: dict[int, float] = {}  # thread -> the deadline its reference calls run under now (a check's)
_modules: dict[tuple, RemoteModule] = {}
BUNDLED = "layer_conformance.reference_impls."


def _reference_group(name: str | None) -> str:
    return "bundled" if name is None or name.startswith(BUNDLED) else name


def _reference_executor(name: str | None = None, create: bool = False) -> Executor | None:
    ident = threading.get_ident()
    key = (ident, _reference_group(name))
    if key not in _references and create:
        import atexit
        # a user's reference module is imported from the working directory; the bundled ones' executor has no
        # user directory on its path at all
        ex = _references[key] = Executor("reference", user_reference=key[1] != "bundled")
        ex.deadline = _deadlines.get(ident)
        atexit.register(ex.close)
    return _references.get(key)


def prestart_references() -> None:
    """Start this thread's executor of the bundled references in the background: validating a contract asks
    its reference's names, and the values checks its outputs."""
    _reference_executor(None, create=True).start_soon()


def reference_executors() -> list[Executor]:
    """This thread's reference executors."""
    ident = threading.get_ident()
    return [ex for (i, _), ex in list(_references.items()) if i == ident]


def reference_module(name: str) -> RemoteModule:
    """A contract's reference module, imported and run only in a reference executor (its own, for a user's)."""
    ex = _reference_executor(name, create=True)
    if (id(ex), name) not in _modules:
        _modules[(id(ex), name)] = RemoteModule(ex, name)
    return _modules[(id(ex), name)]


def references_until(deadline: float | None) -> None:
    """Reference calls of this thread, in executors it has and those it starts, end at ``deadline`` (None: no end)."""
    ident = threading.get_ident()
    if deadline is None:
        _deadlines.pop(ident, None)
    else:
        _deadlines[ident] = deadline
    for ex in reference_executors():
        ex.deadline = deadline


@contextlib.contextmanager
def reference_deadline(seconds: float):
    """Reference calls made outside a check (the contract's self-check at load) end after ``seconds``."""
    references_until(time.monotonic() + seconds)
    try:
        yield
    finally:
        references_until(None)


_tables = threading.Lock()


_names: dict = {}


def reference_names(name: str, timeout: float = LOAD_TIMEOUT) -> tuple[list[str], str | None]:
    """The callables a reference module defines, or why it cannot be imported (its exception, or
    the time limit: a module that hangs at import is ended from outside)."""
    if name not in _names:
        executor = reference_module(name)._executor
        saved, executor.deadline = executor.deadline, time.monotonic() + timeout
        try:
            _names[name] = (executor.request("reference_names", module=name), None)
        except RemoteError as exc:
            _names[name] = ([], exc.remote_text)
        except CheckTimeout:
            _names[name] = ([], f"importing it took longer than {timeout:g} s")
        except ExecutorLost as exc:
            _names[name] = ([], str(exc))
        finally:
            executor.deadline = saved  # a check's own, where it asked
    return _names[name]
