"""The executor's side: the request loop of a process that holds code under test.

An executor is started by the judge through execnet and answers requests until the judge closes
it or kills it. It holds one framework's adapter (or none: the reference executor runs numpy-only
contract references), imports user modules, and sends back plain data (``wire``). Objects that
are not data stay here and travel as handles.

Nothing here decides a verdict. The judge treats every answer as data from an untrusted process:
a layer may patch this module, exit, fork or hang, and the judge, which runs elsewhere, only
loses the answer.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import time

from .. import binding, wire
from . import fingerprint as own_code


def _settle(adapter):
    """Import, or call, what the adapter's ``settled_by`` names: the framework's own first-use patches, made
    before the fingerprint so that only the code under test can change it."""
    _import_or_call(getattr(adapter, "settled_by", ()))


def _import_or_call(entries, missing_ok=False) -> None:
    """Each entry ``module`` imported, or ``module:attr.attr`` imported and called."""
    for entry in entries:
        name, _, attr = entry.partition(":")
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError:
            if missing_ok:
                continue
            raise
        if attr:
            for part in attr.split("."):
                obj = getattr(obj, part)
            obj()


# The frameworks' own switches for their C++ logs below warning level (TensorFlow's, and XLA's in TensorFlow
# and jaxlib alike: "I0000 ... cpu_feature_guard", oneDNN's and absl's start-up lines), read as they load; a
# value the user set is kept
QUIET_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "1"}


def _quiet(stderr_file: str | None) -> None:
    """Before any framework loads: its logs below warning level off, and this process's stderr (file
    descriptor 2, which C++ logs write to as well) into the judge's file, which the judge reads back bounded
    per check (client.StderrTail). Nothing an executor writes floods the terminal."""
    for name, value in QUIET_LOGS.items():
        os.environ.setdefault(name, value)
    if stderr_file:
        fd = os.open(stderr_file, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 2)
        os.close(fd)


def _no_tqdm_monitor():
    """tqdm starts a monitor thread with its first progress bar, and the thread outlives the bar. Frameworks
    open (disabled) bars of their own (torch.compile and torch.export do), and the executor would take the
    thread for one the layer left running and give the next target a fresh process. ``monitor_interval =
    0`` is tqdm's own switch for that thread; nothing else of tqdm changes."""
    import importlib.util
    if importlib.util.find_spec("tqdm") is None:
        return
    import tqdm
    tqdm.tqdm.monitor_interval = 0


FILES_CAP = 10_000  # the most files an executor reports (what --changed-since compares a baseline's run by)
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class FileRecorder:
    """The files the code under test loads (modules it imports, data it opens), seen by an audit hook (PEP 578)
    while ``on``: what --changed-since later selects a binding by (targets.select_changed), so that a dynamic
    import, a data file or a symbolic link is seen as well as a static import. The Python installation's own
    files, the harness's and the system's pseudo-files are left out; so is a file this process wrote before it
    read it (a temporary file of a check). A hostile layer can fake or hide events: only a baseline's (trusted)
    run is read back."""

    def __init__(self):
        self.on = False
        self.raw: dict = {}        # absolute path -> None, in the order seen (not yet checked)
        self.names: set = set()    # modules imported (an import from a cached .pyc opens no .py)
        self.written: set = set()
        self.files: dict = {}      # reported or to report: path -> None
        self.reported = 0
        self.truncated = False
        self.skip = _installation_dirs()
        self.system = _system_dirs()
        sys.addaudithook(self.hook)

    def hook(self, event, args):
        if not self.on or (event != "open" and event != "import"):
            return
        try:  # an audit hook that raises fails the call it audits: never
            if event == "import":
                if len(self.names) < FILES_CAP:
                    self.names.add(args[0])
                return
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return  # a file descriptor
            path = os.path.abspath(path)
            if path.startswith(self.skip):
                return
            if (any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITES)):
                if path not in self.raw and len(self.written) < FILES_CAP:
                    self.written.add(path)
            elif path not in self.written and path not in self.raw:
                if len(self.raw) < FILES_CAP:
                    self.raw[path] = None
                else:
                    self.truncated = True
        except Exception:
            pass

    def note_held(self) -> None:
        """Count the files this process maps or holds open now (/proc/self/maps, /proc/self/fd) as seen: what
        native code reads raises no audit event (safetensors' and torch.from_file's mmap, a file a C library
        keeps open). The system's and the installation's files (shared libraries) and files open for writing
        only are left out, as are, later, the judge's temporary files (plugin._loaded_table)."""
        on, self.on = self.on, False  # what this reads is the harness's
        try:
            for path in _held_files():
                if path.startswith(self.skip) or path.startswith(self.system) or path in self.written \
                        or path in self.raw:
                    continue
                if len(self.raw) >= FILES_CAP:
                    self.truncated = True
                    break
                self.raw[path] = None
        except Exception:
            pass
        finally:
            self.on = on

    def take(self) -> dict:
        """The files seen since the last ``take`` (a path and, where a symbolic link leads elsewhere, its
        target), those mapped or open now among them (note_held), and whether the list was cut at FILES_CAP."""
        self.note_held()
        on, self.on = self.on, False  # what this reads is the harness's
        try:
            raw, self.raw = list(self.raw), {}
            names, self.names = list(self.names), set()
            for name in names:
                module = sys.modules.get(name)
                try:
                    file = getattr(module, "__file__", None) if module is not None else None
                except Exception:
                    file = None
                if isinstance(file, str):
                    raw.append(os.path.abspath(file))
            for path in raw:
                if path.endswith(".pyc") and "__pycache__" in path:
                    try:
                        source = importlib.util.source_from_cache(path)
                    except ValueError:
                        source = None
                    if source and os.path.isfile(source):
                        path = source
                if path.startswith(self.skip) or not os.path.isfile(path) or _metadata(path):
                    continue  # directories, paths that never existed or are gone, packages' metadata
                for f in (path, os.path.realpath(path)):
                    if f not in self.files and not f.startswith(self.skip):
                        if len(self.files) >= FILES_CAP:
                            self.truncated = True
                            break
                        self.files[f] = None
            new = list(self.files)[self.reported:]
            self.reported = len(self.files)
            return {"files": new, "files_truncated": self.truncated}
        finally:
            self.on = on


def _held_files() -> list[str]:
    """The files this process maps (/proc/self/maps) or holds open for reading (/proc/self/fd), absolute paths in
    the order found; Linux only (elsewhere none)."""
    out: dict = {}
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                parts = line.rstrip(b"\n").split(None, 5)  # address perms offset dev inode [path]
                if len(parts) == 6 and parts[5].startswith(b"/"):
                    out[os.fsdecode(parts[5])] = None
    except OSError:
        pass
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            with open(f"/proc/self/fdinfo/{fd}") as f:
                flags = next((int(line.split()[1], 8) for line in f if line.startswith("flags:")), 0)
        except (OSError, ValueError, IndexError):
            continue  # closed meanwhile (this listing's own descriptor)
        if target.startswith("/") and flags & os.O_ACCMODE != os.O_WRONLY:  # written only: a log, not an input
            out[target] = None
    return list(out)


# the system's own files (shared libraries, locale and time zone data, configuration): any process maps or opens some
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr/bin", "/usr/sbin", "/usr/lib",
                "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib", "/usr/share", "/etc", "/nix/store")


def _system_dirs() -> tuple:
    """_SYSTEM_DIRS, each ending with a separator, but those that hold the project (the current directory)."""
    cwd = os.getcwd() + os.sep
    out = set()
    for d in _SYSTEM_DIRS:
        for p in (d, os.path.realpath(d)):
            if not cwd.startswith(p + os.sep):
                out.add(p + os.sep)
    return tuple(sorted(out))


def _metadata(path: str) -> bool:
    """A file of an installed distribution's metadata (entry points a framework looks up), wherever it lies."""
    return any(part.endswith((".dist-info", ".egg-info")) for part in path.split(os.sep)[:-1])


def _installation_dirs() -> tuple:
    """Where the Python installation, its packages and the harness live, and the pseudo-filesystems: no file
    there is a user's (each ends with a separator)."""
    import site
    import sysconfig
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        dirs.update(site.getsitepackages() + [site.getusersitepackages()])
    except Exception:  # an old virtualenv's site module
        pass
    for entry in sys.path:
        parts = entry.split(os.sep)
        for i, part in enumerate(parts):
            if part in ("site-packages", "dist-packages"):
                dirs.add(os.sep.join(parts[:i + 1]))
    cwd = os.getcwd()
    for d in list(dirs):
        if not d or os.path.abspath(d) == os.sep or (cwd + os.sep).startswith(os.path.abspath(d) + os.sep):
            # a prefix holding the project itself (a Python at /, a project under /usr/local): its libraries only
            dirs.discard(d)
            dirs.update(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib"))
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the harness package
    out = {"/proc/", "/sys/", "/dev/"}
    for d in dirs:
        if d and os.path.abspath(d) != os.sep:
            out.update(p.rstrip(os.sep) + os.sep for p in (os.path.abspath(d), os.path.realpath(d)))
    return tuple(sorted(out))


def _own_path_first(user_path: list, cwd: str | None) -> None:
    """This process's sys.path: its own interpreter's entries first, never the working directory (``python -c``'s
    ``''``, where -P could not keep it out) nor the user's tree ahead of them; then ``user_path``, the tree under
    test that the judge gives the processes importing it (layer, fresh, probe; none for a zygote, a native
    executor or the bundled references); then PYTHONPATH's entries outside the working directory (the
    environment's, not the tree's)."""
    def real(p):
        return os.path.realpath(p or os.getcwd())
    # the directories themselves (a virtualenv inside the project is the installation, and stays)
    trees = {real(d) for d in [os.getcwd(), cwd or os.getcwd(), *user_path]}
    pythonpath = {real(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    kept, later = [], []
    for entry in sys.path:
        if not isinstance(entry, str) or entry == "":
            continue
        if not os.path.isabs(entry) and not os.path.exists(entry):
            kept.append(entry)   # a path hook's token (an editable install's finder), no directory
            continue
        r = real(entry)
        if r in trees:
            continue
        (later if r in pythonpath else kept).append(entry)
    # PYTHONPATH's entries inside the working directory are the user's tree: only in user_path, where given
    home = [real(d).rstrip(os.sep) + os.sep for d in (os.getcwd(), cwd or os.getcwd())]
    later = [p for p in later if p not in user_path and not any((real(p) + os.sep).startswith(h) for h in home)]
    sys.path[:] = kept + [p for p in user_path if p not in kept] + later


class Server:
    def __init__(self, channel, config: dict):
        self.channel = channel
        self.pid = os.getpid()
        self.calling = None  # the adapter method the request being answered calls
        self.sandbox = config.get("sandbox")  # what the judge started this process in (None: no sandbox)
        if self.sandbox:
            # a session of its own: no signal to the judge's process group (kill(0, ...)) reaches the judge
            try:
                os.setsid()
            except OSError:
                pass
        _quiet(config.get("stderr_file"))
        _own_path_first(config.get("user_path") or [], config.get("cwd"))
        if config.get("cwd"):
            os.chdir(config["cwd"])
        _limit_memory(config.get("memory_limit_gib"))
        _no_core_dumps()
        _no_tqdm_monitor()
        self.framework = config.get("framework")
        self.role = config.get("role")
        # the processes that run the code under test note the files it loads (a fresh one: all it runs is that)
        self.reads = FileRecorder() if self.role in ("layer", "fresh") else None
        self.adapter = None
        if config.get("stack_file"):
            # at a timeout the judge asks for every thread's stack (SIGUSR2) before it kills this process, to
            # say where the layer hung; the dump is written from the signal handler, in C, even while Python
            # is stuck in a call
            import faulthandler
            import signal
            self.stacks = open(config["stack_file"], "w")
            faulthandler.register(signal.SIGUSR2, file=self.stacks, all_threads=True)
        if self.role == "zygote":
            # the framework's modules and nothing else: no adapter, no operation (a framework that has run
            # an op has thread pools, and a fork keeps only the forking thread)
            _preload(self.framework)
        elif self.framework:
            from layer_conformance.layerside.adapters import get_adapter  # an adapter module prepares its framework's import
            self.adapter = get_adapter(self.framework)
            if config.get("role") == "layer":
                # modules that replace the framework's own functions when first imported (torch._dynamo
                # wraps torch.manual_seed): imported at start-up (off the checks' clock), before the
                # fingerprint, so that only the code under test can change it
                _settle(self.adapter)
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}
        self.pinned: set[int] = set()
        self.next_id = 1
        self.modules: dict[str, object] = {}
        self.threads = {t.ident for t in threading.enumerate()}
        self.check_globals = None
        self.fingerprint = None  # taken before the first user module is imported
        if self.reads is not None and self.role == "fresh":
            self.reads.on = True

    # -- handles ---------------------------------------------------------------------------
    def handle_of(self, obj):
        hid = self.ids.get(id(obj))
        if hid is None or self.objects.get(hid) is not obj:
            hid = self.next_id
            self.next_id += 1
            self.objects[hid] = obj
            self.ids[id(obj)] = hid
        return {"__h__": hid, "type": type(obj).__name__, "meta": self._meta(obj)}

    def _meta(self, obj) -> dict:
        """What the judge may ask about a tensor without another round trip."""
        a = self.adapter
        if a is None:
            return {}
        try:
            if not a.is_tensor(obj):  # a framework's variable object (an nnx.Param) still has a shape
                shape = getattr(obj, "shape", None)
                return {"shape": [int(d) for d in shape]} if isinstance(shape, tuple) else {}
            meta = {"tensor": True, "dtype": a.dtype_name(obj), "device": a.device_of(obj),
                    "shape": [int(d) for d in obj.shape]}
        except Exception:
            return {}
        if a.is_virtual(meta["device"]):
            return meta  # a meta-device tensor has no values (and asking costs torch a slow error)
        try:
            meta["value"] = wire.array_to_bytes(a.numpy(obj))
        except Exception:
            pass
        return meta

    def object_of(self, data):
        if "__h__" in data:
            return self.objects[data["__h__"]]
        if "__rebuild__" in data:
            spec = wire.decode(data["__rebuild__"], self.object_of)
            return self._rebuilder(spec)
        raise ValueError(f"unknown encoded value {sorted(data)}")

    def _rebuilder(self, spec):
        """A fresh layer with the same state, built where the adapter calls it (Keras: under tf.device)."""
        adapter = self.adapter

        def rebuild():
            return adapter.built_with(spec["impl"], spec["constructor"], spec["inputs"], spec["assign"])[1]
        return rebuild

    # -- requests ----------------------------------------------------------------------------
    def loop(self):
        self.channel.send({"hello": self.hello()})
        idle = _when_idle(self.framework) if self.role == "zygote" else []
        while True:
            try:
                msg = self.channel.receive(IDLE_WAIT if idle else None)
            except self.channel.TimeoutError:
                _import_idle(idle.pop(0))
                continue
            except EOFError:
                return
            if msg is None:
                return
            reply = self.answer(msg)
            if os.getpid() != self.pid:
                os._exit(0)  # a layer forked: the child never answers in the parent's name
            try:
                self.channel.send(reply)
            except Exception as exc:  # something in the answer that is not plain data
                self.channel.send({"id": reply.get("id"), "raised": self._describe(exc)})

    def answer(self, msg: dict) -> dict:
        rid = msg.get("id")
        self.calling = None
        try:
            if msg.get("begin"):
                self.op_begin_check()
            self._own_code()
            result = getattr(self, "op_" + msg["op"])(**wire.decode(msg.get("args") or {}, self.object_of))
            self._own_code(after=True)
            return {"id": rid, "ok": wire.encode(result, self.handle_of)}
        except BaseException as exc:  # everything the code under test can raise, SystemExit included
            if os.getpid() != self.pid:
                os._exit(0)
            self._own_code(after=True)
            return {"id": rid, "raised": self._describe(exc)}

    def _describe(self, exc: BaseException) -> dict:
        from layer_conformance.errors import missing_dependency, note_harness_error, unexpected_error
        from layer_conformance.record import NotApplicable
        # a method whose exception is the answer a check asks for (a strict load refusing a bad state) is left out
        refusals = getattr(getattr(self, "adapter", None), "refusals", ())
        if not isinstance(exc, NotApplicable) and self.calling not in refusals:
            note_harness_error(exc)
        # the one field n/a crosses the boundary in: the reason and its code. Whoever raised it in this process (the
        # adapter, or a layer that raises NotApplicable or forges adapter frames) says the same: a claim, which the
        # judge weighs by the code against the check's declared reasons (check_catalog.na_accepted), never by
        # where it was raised
        not_applicable = {"reason": str(exc.reason) or "not applicable", "code": str(getattr(exc, "code", ""))} \
            if isinstance(exc, NotApplicable) else None
        return {"type": type(exc).__name__, "message": _text(exc), "text": unexpected_error(exc),
                "not_applicable": not_applicable, "missing_dependency": missing_dependency(exc)}

    def hello(self) -> dict:
        out = {"pid": self.pid, "python": sys.version.split()[0]}
        a = self.adapter
        if a is not None:
            from layer_conformance.protocol import methods
            out.update(name=a.name, cpu_device=a.cpu_device, gpu_device=a.gpu_device,
                       retraces_per_shape=a.retraces_per_shape, parameter_type=a.parameter_type,
                       immutable_arrays=a.immutable_arrays,
                       implements=[m for m in methods() if a.implements(m)])
        out["sandbox"] = _sandbox_seen(self.sandbox)
        return out

    # -- operations ----------------------------------------------------------------------------
    def op_call(self, method: str, args=(), kwargs=None):
        if method.startswith("_"):
            raise AttributeError(method)
        self.calling = method
        return getattr(self.adapter, method)(*args, **(kwargs or {}))

    def op_load(self, spec: str, constructor: dict | None = None):
        """Import ``module:attr``; report what the import changed in process-global state and, for a
        layer, whether its constructor can take the contract's arguments."""
        if self.fingerprint is None:
            _settle(self.adapter)  # done at start-up by a layer executor; a second time costs nothing
            self.fingerprint = _fingerprint()
        before = self._globals()
        if self.reads is not None:
            self.reads.on = True
        try:
            obj = _resolve(spec)
        finally:
            if self.reads is not None:
                self.reads.on = False
        changed = self._restore(before)
        self.pinned.add(self.handle_of(obj)["__h__"])
        module = sys.modules.get(spec.split(":", 1)[0])
        return {"impl": obj, "file": getattr(module, "__file__", None), "changed": changed,
                "threads": self._new_threads(), **self.op_files(),
                "constructor_problem": binding.problem(spec, binding.signature_of(obj), constructor,
                                                       unaccepted_too=False) if constructor is not None else None}

    def op_detect(self, spec: str):
        """The framework a ``module:attr`` belongs to, among those the import brought in."""
        from layer_conformance.layerside.adapters import detect
        obj = _resolve(spec)
        module = sys.modules.get(spec.split(":", 1)[0])
        found = detect(obj)
        return {"framework": found, "file": getattr(module, "__file__", None),
                "signature": binding.signature_of(obj)}

    def op_import_object(self, path: str):
        """A dotted ``module.attr`` (a contract's native layer or function)."""
        mod_name, _, attr = path.rpartition(".")
        obj = getattr(importlib.import_module(mod_name), attr)
        self.pinned.add(self.handle_of(obj)["__h__"])
        return obj

    def op_health(self) -> list[str]:
        """Why this process must not take another target: functions of the harness, numpy or the
        framework replaced since before the first user import, or threads left running."""
        reasons = []
        if self.fingerprint is not None:
            now = _fingerprint(self.fingerprint)
            patched = [f"{m}.{n}" for m, names in self.fingerprint.items() for n, i in names.items()
                       if now.get(m, {}).get(n) != i]
            if patched:
                reasons.append("patched " + ", ".join(patched[:5]) + (" ..." if len(patched) > 5 else ""))
        threads = self._new_threads()
        if threads:
            reasons.append("threads left running: " + ", ".join(threads))
        return reasons

    def op_fork(self, token: str) -> dict:
        """(The zygote.) A new executor process, forked from this one: it has imported the framework and
        nothing of the code under test, as a process started now would have, without paying the import.
        It listens on a loopback port for one execnet socket gateway whose bootstrap carries ``token``
        (which only the judge knows: a process that connects first without it is turned away)."""
        if self.role != "zygote":
            raise RuntimeError("only the zygote forks")
        return _fork_listening(token, self.channel, isolate=bool(self.sandbox))

    def op_exit_status(self, pid: int, wait: float = 5.0):
        """(The zygote.) How its child ``pid`` ended: an exit code, or minus the signal that killed it; None
        while it runs past ``wait`` seconds, or for a pid that is not its child."""
        if self.role != "zygote":
            raise RuntimeError("only the zygote has forked children")
        ends = time.monotonic() + wait
        while pid not in _ENDED:
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if got:
                _ENDED[pid] = status
            elif time.monotonic() > ends:
                return None
            else:
                time.sleep(0.02)
        status = _ENDED.pop(pid)
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def op_begin_check(self):
        self.check_globals = self._globals()
        if self.reads is not None:
            self.reads.on = True

    def op_end_check(self):
        """Put global state back as the check found it; say what the layer changed (and the files it loaded, and
        what of the executor's own code it replaced: ``code``)."""
        if self.reads is not None and self.role == "layer":
            self.reads.on = False
        if self.reads is not None:
            self.reads.note_held()  # before the release: what the check's objects still map (weights via mmap)
        changed = self._restore(self.check_globals) if self.check_globals is not None else []
        self.check_globals = None
        self.op_release()
        return {"changed": changed, "threads": self._new_threads(), **self.op_files(), "code": self.op_code()}

    code = None  # (fingerprint.Record) this process's own code before any code under test ran

    def _own_code(self, after: bool = False) -> None:
        """(A process that runs code under test.) Before its first request, the fingerprint of the executor's own
        code (layerside/fingerprint.py); ``after`` each request, before its answer is encoded, what differs from it
        is kept for the end of the check."""
        if self.role in ("layer", "fresh"):
            if self.code is None:
                self.code = own_code.take(self)
            elif after:
                own_code.seen(self.code)

    def op_code(self) -> list[str]:
        """What of the executor's own code differs from its fingerprint, now or at any request since the last
        ask (the end of a check): empty where nothing does."""
        return own_code.ended(self.code)

    def op_files(self) -> dict:
        """The files the code under test loaded since the last report (FileRecorder): {"files", "files_truncated"}."""
        return self.reads.take() if self.reads is not None else {}

    def op_release(self):
        """Drop every object the judge no longer refers to (all but loaded implementations)."""
        for hid in [h for h in self.objects if h not in self.pinned]:
            self.ids.pop(id(self.objects.pop(hid)), None)

    def op_reference(self, module: str, function: str, args=(), kwargs=None):
        return getattr(self._module(module), function)(*args, **(kwargs or {}))

    def op_reference_names(self, module: str):
        """The callables a contract's reference module defines (validated at load)."""
        mod = self._module(module)
        return sorted(n for n in dir(mod) if callable(getattr(mod, n, None)))

    def _module(self, name):
        if name not in self.modules:
            self.modules[name] = importlib.import_module(name)
        return self.modules[name]

    # -- global state --------------------------------------------------------------------------
    def _globals(self):
        import numpy as np
        return {"numpy": np.random.get_state(),
                "adapter": self.adapter.save_globals() if self.adapter is not None else None}

    def _restore(self, saved) -> list[str]:
        import numpy as np
        changed = list(self.adapter.restore_globals(saved["adapter"])) if self.adapter is not None else []
        now = np.random.get_state()
        old = saved["numpy"]
        if not (now[0] == old[0] and np.array_equal(now[1], old[1]) and now[2:] == old[2:]):
            changed.append("numpy's global RNG state")
        np.random.set_state(old)
        return changed

    def _new_threads(self) -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.ident not in self.threads and t.is_alive())


def _watched() -> frozenset:
    from layer_conformance.frameworks import FRAMEWORKS
    return frozenset(("numpy", "layer_conformance", "builtins", "os", "sys")).union(*(f.watched for f in FRAMEWORKS.values()))


def _fingerprint(like: dict | None = None) -> dict:
    """{module: {name: id}} of the functions and classes of the modules a verdict's data passes
    through. Replacing one (a layer patching numpy or the adapter) changes an id."""
    out = {}
    watched = _watched()
    for name in (list(like) if like is not None else list(sys.modules)):
        if like is None and (name.split(".")[0] not in watched or name.count(".") > 2):
            continue
        d = getattr(sys.modules.get(name), "__dict__", None)
        if isinstance(d, dict):
            out[name] = {k: id(v) for k, v in list(d.items()) if callable(v)}
    return out


def _text(exc) -> str:
    try:
        return str(exc)
    except Exception:
        return "(an exception whose message cannot be read)"


def _resolve(spec: str):
    mod_name, _, attr = spec.partition(":")
    obj = importlib.import_module(mod_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _limit_memory(gib) -> None:
    """Cap the data segment so that a layer exhausting memory gets an allocation error; the judge
    also watches the process's size from outside, since a process can raise its own limit."""
    import resource
    if not gib or not hasattr(resource, "RLIMIT_DATA"):
        return
    want = int(gib * 2 ** 30)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (want, want))


def _no_core_dumps() -> None:
    """A layer that crashes its process (os.abort, a segfault in native code) writes no core file: none lands in
    the user's directory, and the process ends at once instead of writing a framework's whole memory out first
    (the judge reports the signal either way)."""
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (AttributeError, ValueError, OSError):  # a platform without the limit
        pass


FORKED_ACCEPT_TIMEOUT = 60.0  # seconds a forked executor waits for the judge before it gives up


def _preload(framework: str) -> None:
    """The zygote's imports: the adapter module (which imports the framework) and the framework modules
    its formats' loaders import on first use (``Adapter.preloaded``: torch.export.load pulls in sympy
    and Dynamo, 1.6 s), so that a forked executor does not import them again for every check."""
    module = importlib.import_module(f"layer_conformance.layerside.adapters.{framework}")
    # a module another version of the framework lacks: its executors import what they need then
    _import_or_call(getattr(module.FrameworkAdapter, "preloaded", ()), missing_ok=True)
    # the wire's bfloat16 (harness/wire.py): up to 0.5 s of its own import (ml_dtypes 0.7), once per run rather
    # than once per target in every forked process that meets a bfloat16 array (JAX and TensorFlow import it anyway)
    _import_or_call(["ml_dtypes"], missing_ok=True)


IDLE_WAIT = 0.05  # seconds without a request after which the zygote imports its next module


def _when_idle(framework: str) -> list:
    """(The zygote.) What it imports while no request waits: ``Adapter.preloaded_when_idle``."""
    module = sys.modules.get(f"layer_conformance.layerside.adapters.{framework}")
    return list(getattr(getattr(module, "FrameworkAdapter", None), "preloaded_when_idle", ()))


def _import_idle(name: str) -> None:
    """One module, imported only as a saving: one that fails (another version of the framework lacks it, or
    it needs a library not installed) is left to the processes that need it, and is no error here."""
    try:
        importlib.import_module(name)
    except Exception:
        pass


_ENDED: dict = {}  # (the zygote) pid -> wait status of children collected before the judge asked how they ended


def _reap() -> None:
    """Collect the zygote's ended children, keeping how each ended for the judge (``op_exit_status``)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if len(_ENDED) > 4096:
            _ENDED.pop(next(iter(_ENDED)))
        _ENDED[pid] = status


def _sandbox_seen(told: str | None) -> dict:
    """The sandbox this process finds itself in: what the judge said, and what it sees (its pid, whether its
    working directory is writable, whether it has a network beyond a loopback)."""
    out = {"told": told, "pid": os.getpid()}
    try:
        out["read_only"] = bool(os.statvfs(os.getcwd()).f_flag & os.ST_RDONLY)
    except OSError:
        pass
    try:
        with open("/proc/net/dev") as f:
            out["network"] = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
    except OSError:
        pass
    return out


def _leave_network() -> None:
    """(A process forked by the zygote, holding the judge's connection.) A user and network namespace of its
    own: no network but a loopback that is down; the connection made before stays open."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return  # the hello's `network` says what it kept
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        except OSError:
            pass


def _fork_listening(token: str, channel, isolate: bool = False) -> dict:
    """A child of this process that listens on a loopback port for one execnet socket gateway whose
    bootstrap carries ``token``, and serves it; {"pid", "port"}. The child never returns here."""
    import socket
    _reap()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _serve_forked(listener, token, channel, isolate)
            code = 0
        finally:
            os._exit(code)  # never back into the parent's loop, nor its atexit handlers
    port = listener.getsockname()[1]
    listener.close()
    return {"pid": pid, "port": port}


def _serve_forked(listener, token: str, zygote_channel, isolate: bool = False) -> None:
    """In the forked child: leave the zygote's pipes alone, take the judge's connection, serve it."""
    io = getattr(getattr(zygote_channel, "gateway", None), "_io", None)
    null = os.open(os.devnull, os.O_RDWR)
    # pipes (a process the judge started) or a socket (a zygote kept between runs)
    for f in (getattr(io, "infile", None), getattr(io, "outfile", None), getattr(io, "sock", None)):
        try:
            os.dup2(null, f.fileno())  # the zygote's line to the judge: nothing here may write to it
        except (AttributeError, OSError, ValueError):
            pass
    if _WARM_LISTENER is not None:
        _WARM_LISTENER.close()  # a kept zygote's door to later judges: never open to the code under test
    conn, address_line = _accept_with(listener, token, FORKED_ACCEPT_TIMEOUT)
    listener.close()
    if conn is None:
        return
    if isolate:
        _leave_network()  # a sandboxed run: the zygote's network was for this connection only
    _exec_bootstrap(conn, address_line)


def serve(channel):
    config = channel.receive()
    Server(channel, config).loop()


_WARM_LISTENER = None  # (a kept zygote) the socket judges connect to: closed in every process it forks


def serve_warm() -> None:
    """(A zygote kept between runs, boundary/warm.py.) Read {"token", "idle_s"} on stdin, listen on a loopback
    port and say it on stdout; then serve each judge that connects with the token, one at a time, as the zygote
    of its run (``serve``: the first one's config imports the framework), until ``idle_s`` pass without one."""
    import json
    import socket
    global _WARM_LISTENER
    told = json.loads(sys.stdin.readline())
    listener = _WARM_LISTENER = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    sys.stdout.write(json.dumps({"port": listener.getsockname()[1]}) + "\n")
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)  # nothing more to say to the judge that started it, which may be gone
    while True:
        conn, address = _accept_with(listener, told["token"], told["idle_s"])
        if conn is None:
            return  # idle too long: the zygote ends, and its namespace with it
        _exec_bootstrap(conn, address)  # returns when the judge closes its connection
        _reap()


def _accept_with(listener, token: str, timeout: float):
    """The next connection whose execnet bootstrap line carries ``token``, and that line; (None, None) after
    ``timeout`` seconds without one. A connection without the token is closed."""
    import socket
    ends = time.monotonic() + timeout
    while True:
        listener.settimeout(max(0.01, ends - time.monotonic()))
        try:
            conn, address = listener.accept()
        except socket.timeout:
            return None, None
        conn.settimeout(FORKED_ACCEPT_TIMEOUT)
        try:
            with conn.makefile("rb") as f:
                line = f.readline(1 << 24)  # execnet's bootstrap: the repr of its source, on one line
        except OSError:
            line = b""
        if token.encode() in line:
            conn.settimeout(None)
            return conn, (address, line)
        conn.close()


def _exec_bootstrap(conn, address_line) -> None:
    """Serve one execnet socket gateway on ``conn``: what execnet's own socketserver evals."""
    import ast
    address, line = address_line
    source = ast.literal_eval(line.decode().rstrip())
    try:
        exec(compile(source, "<executor>", "exec"), {"clientsock": conn, "address": address})
    finally:
        conn.close()
