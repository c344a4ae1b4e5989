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

from .. import binding, protocol, wire
from . import fingerprint as own_code
from .files import FileRecorder, _held_files  # noqa: F401  (_held_files: tests reach it here)
# the zygote's part (serve_warm: boundary/warm.py's entry names it here)
from .zygote import (IDLE_WAIT, _fork_listening, _import_idle, _import_or_call, _preload, _when_idle,  # noqa: F401
                     exit_status, serve_warm)


def _settle(adapter):
    """Import, or call, what the adapter's ``settled_by`` names: the framework's own first-use patches, made
    before the fingerprint so that only the code under test can change it."""
    _import_or_call(getattr(adapter, "settled_by", ()))


# The frameworks' own switches for their C++ logs below warning level (TensorFlow's, and XLA's in TensorFlow
# and jaxlib alike: "I0000 ... cpu_feature_guard", oneDNN's and absl's start-up lines), read as they load; a
# value the user set is kept
QUIET_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "1"}


def _quiet(stderr_file: str | None) -> None:
    """Before any framework loads: its logs below warning level off, and this process's stderr (file
    descriptor 2, which C++ logs write to as well) into the judge's file, which the judge reads back bounded
    per check (boundary.stderr.StderrTail). Nothing an executor writes floods the terminal."""
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
            from layer_conformance.layerside import get_adapter  # an adapter package prepares its framework's import
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
        from layer_conformance.protocol import NotApplicable, NotApplicablePart
        # a method whose exception is the answer a check asks for (a strict load refusing a bad state) is left out
        refusals = getattr(getattr(self, "adapter", None), "refusals", ())
        if not isinstance(exc, NotApplicable) and self.calling not in refusals:
            note_harness_error(exc)
        # the one field n/a crosses the boundary in, typed: the reason and its code (protocol.NotApplicablePart). Whoever raised it in this process (the
        # adapter, or a layer that raises NotApplicable or forges adapter frames) says the same: a claim, which the
        # judge weighs by the code against the check's declared reasons (check_catalog.na_accepted), never by
        # where it was raised
        not_applicable = wire.encode(NotApplicablePart(str(exc.reason) or "not applicable",
                                                       str(getattr(exc, "code", ""))), None) \
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
    def op_call(self, request):
        """A protocol method's request (``protocol.request``, decoded by ``wire``: an unknown method or other
        fields were refused there), answered by the adapter with the request's fields by keyword."""
        self.calling = protocol.method_of(request)
        return protocol.answer(self.adapter, request)

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
        from layer_conformance.layerside import detect
        obj = _resolve(spec)
        module = sys.modules.get(spec.split(":", 1)[0])
        found = detect(obj)
        return {"framework": found, "file": getattr(module, "__file__", None),
                "signature": binding.signature_of(obj), "defaults": binding.defaults_of(obj)}

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
        return exit_status(pid, wait)

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

    def op_reference_in_dtype(self, module: str, function: str, dtype: str, args=(), kwargs=None, accumulate=None):
        """The reference's ``function`` run in ``dtype`` (below float64): (its result, how it ran) (layerside/rounding.py)."""
        from .rounding import run_in_dtype
        return run_in_dtype(getattr(self._module(module), function), dtype, list(args), kwargs or {}, accumulate)

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


def serve(channel):
    config = channel.receive()
    Server(channel, config).loop()
