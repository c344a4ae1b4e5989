"""``python -m layer_conformance new``: a contract drafted from the layer itself.

The layer is imported, built and called only in an executor (the harness's own layer executor, forked from the
framework's zygote, as a run's are): this process reads its constructor's signature and what one build and one
forward pass on a drawn input show, as plain data. From that, ``scaffold_text`` writes the contract (its cases,
the dtypes the forward accepts, the state with each slot's initial value, the gradients) and, unless the
reference is another implementation (``--reference``), a numpy reference stub beside it for the user to fill in.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from .dtypes import FLOATS, HALF, is_floating, np_dtype

TRIED_DTYPES = ("float32", "float64", "bfloat16", "float16")
BUILD_TIMEOUT = 120.0  # seconds for the build, the forward passes and the gradient together
SEED = 0


class ScaffoldError(Exception):
    """Why no contract could be drafted; ``code`` is the exit code (layer_conformance.exitcodes)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def _usage(message: str) -> ScaffoldError:
    from .exitcodes import EXIT_USAGE
    return ScaffoldError(message, EXIT_USAGE)


@dataclasses.dataclass
class Slot:
    path: str            # the layer's own name for it (w1.weight, w1/kernel)
    name: str            # the contract's slot name (w1)
    shape: tuple
    dtype: str
    trainable: bool
    init: object         # "ones" | "zeros" | "random" | "reference" | {"linspace": [c, c]}
    finite: bool = True


@dataclasses.dataclass
class Observed:
    """What one build and one forward pass of the layer showed."""
    framework: str
    slots: list
    output_shape: tuple
    output_dtype: str
    dtypes: list            # the floating dtypes whose forward ran and gave finite values of that dtype
    refused: dict           # dtype -> why not
    grad_inputs: list       # input names that got a gradient
    grad_slots: list        # slot names that got a gradient
    gaps: dict = dataclasses.field(default_factory=dict)  # (check, dtype) -> the atol its own float64 run asks


# -- the command line's values ------------------------------------------------------------------------------
def parse_inputs(texts: list) -> dict:
    """``--input "x: [4, 16]"`` (also ``"x: {shape: [4, 16], dtype: float64}"``), repeated: {name: (shape, dtype)},
    in the order the layer takes them."""
    import yaml
    out: dict = {}
    for text in texts:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            data = None
        if not isinstance(data, dict) or len(data) != 1:
            raise _usage(f"--input {text!r}: expected NAME: [dims], e.g. --input \"x: [4, 16]\"")
        (name, spec), = data.items()
        spec = {"shape": spec} if isinstance(spec, list) else spec
        shape, dtype = (spec.get("shape"), spec.get("dtype", "float32")) if isinstance(spec, dict) else (None, None)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise _usage(f"--input {text!r}: the input's name must be a Python identifier (the reference's argument)")
        if not isinstance(shape, list) or not shape or not all(type(d) is int and d > 0 for d in shape):
            raise _usage(f"--input {text!r}: the shape must be a list of positive integers, e.g. [4, 16]")
        if dtype not in FLOATS + ("int32", "int64", "bool"):
            raise _usage(f"--input {text!r}: dtype {dtype!r} is not one of {', '.join(FLOATS)}, int32, int64, bool")
        if name in out:
            raise _usage(f"--input {name!r} is given twice")
        out[name] = (tuple(shape), dtype)
    if not out:
        raise _usage("give the layer's input with --input, e.g. --input \"x: [4, 16]\"")
    return out


def parse_args(items: list) -> dict:
    """``--arg h=64`` -> {"h": 64}: the value read as YAML (a number, true/false, a string)."""
    import yaml
    out = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise _usage(f"--arg {item!r}: expected NAME=VALUE, e.g. --arg h=64")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError:
            value = text
        if type(value) not in (bool, int, float, str):
            raise _usage(f"--arg {item!r}: the value must be a number, true/false or a string")
        out[name] = value
    return out


def constructor_for(impl: str, found: dict, given: dict) -> dict:
    """The constructor arguments: the signature's plain defaults, then ``--arg``'s values; a required parameter
    that neither gives is a usage error naming it."""
    from .binding import SUPPLIED
    signature = found.get("signature") or {"params": [], "required": [], "takes_any": True}
    missing = [n for n in signature["required"] if n not in given and n not in SUPPLIED]
    if missing:
        args = " ".join(f"--arg {n}=VALUE" for n in missing)
        raise _usage(f"{impl} requires {', '.join(map(repr, missing))} (no default): give "
                     f"{'it' if len(missing) == 1 else 'them'} with {args}")
    unknown = [n for n in given if n not in signature["params"] and not signature["takes_any"]]
    if unknown:
        raise _usage(f"--arg {', '.join(unknown)}: not a parameter of {impl} (its parameters: "
                     f"{', '.join(signature['params']) or 'none'})")
    merged = {**(found.get("defaults") or {}), **given}
    order = list(signature["params"]) + list(merged)
    return {k: merged[k] for k in sorted(merged, key=order.index)}


def contract_name(impl: str, name: str | None) -> str:
    """``--name``, else the layer's name in lower case; never a bundled contract's name (results, test ids and
    reproduce lines name a contract by it): a default that is one takes ``my_`` before it."""
    from .contract import bundled_contracts
    bundled = set(bundled_contracts())
    if name is not None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise _usage(f"--name {name!r}: lower-case letters, digits and _, starting with a letter")
        if name in bundled:
            raise _usage(f"--name {name!r} is a bundled contract's name (results and reproduce lines name a "
                         f"contract by it): choose another, e.g. --name my_{name}")
        return name
    attr = impl.rpartition(":")[2].rpartition(".")[2]
    snake = re.sub(r"[^a-z0-9_]+", "_", attr.lower()).strip("_")
    snake = snake if re.fullmatch(r"[a-z][a-z0-9_]*", snake) else "layer"
    return f"my_{snake}" if snake in bundled else snake


# -- what the layer shows, in an executor ---------------------------------------------------------------------
def detect(impl: str, framework: str | None, python: str | None) -> dict:
    """{"framework", "file", "signature", "defaults"} of ``impl``, from a throwaway executor that imports it."""
    from .boundary import ExecutorLost, RemoteError
    from .boundary.client import CheckTimeout
    from .boundary.session import Probe
    from .frameworks import FRAMEWORKS
    if ":" not in impl:
        raise _usage(f"--impl {impl!r}: expected MODULE:ATTR, e.g. mypkg.layers:SwiGLU")
    probe = Probe()
    try:
        found = probe.detect(impl, python, framework=framework)
    except RemoteError as exc:
        raise _usage(f"--impl {impl!r}: importing it raised {exc.remote_text}") from None
    except (ExecutorLost, CheckTimeout) as exc:
        raise _usage(f"--impl {impl!r}: importing it ended its process ({exc})") from None
    finally:
        probe.close()
    found = dict(found)
    found["framework"] = framework or found.get("framework")
    if found["framework"] is None:
        raise _usage(f"--impl {impl!r}: cannot tell which framework it belongs to; pass --framework "
                     f"{'|'.join(FRAMEWORKS)}")
    return found


def draw(inputs: dict) -> list:
    rng = np.random.default_rng(SEED)
    out = []
    for shape, dtype in inputs.values():
        a = rng.standard_normal(shape)
        out.append(a.astype(np_dtype(dtype)) if is_floating(np_dtype(dtype)) else np.zeros(shape, dtype))
    return out


def observe(impl: str, framework: str, python: str | None, constructor: dict, inputs: dict) -> Observed:
    """Build the layer once (the framework seeded), call it on a drawn input in each floating dtype, take one
    gradient: all in a layer executor; this process sees handles and arrays."""
    from .boundary import ExecutorLost, RemoteError
    from .boundary.client import CheckTimeout
    from .boundary.session import LoadFailed, Session, UsageProblem
    from .exitcodes import EXIT_FAILED
    session = Session({framework: python} if python else {})
    try:
        try:
            handle, _ = session.load(framework, impl, constructor)
        except (LoadFailed, UsageProblem) as exc:
            raise _usage(str(exc)) from None
        adapter = session.adapter(framework)
        session.begin_check(framework, BUILD_TIMEOUT)
        try:
            return _observe(adapter, handle, framework, constructor, inputs)
        except RemoteError as exc:
            raise ScaffoldError(f"{impl} raised while being built and called on the drawn input "
                                f"({_shapes(inputs)}): {exc.remote_text}", EXIT_FAILED) from None
        except (ExecutorLost, CheckTimeout) as exc:
            raise ScaffoldError(f"building and calling {impl} ended its executor: {exc}", EXIT_FAILED) from None
        finally:
            try:
                session.end_check(framework)
            except (ExecutorLost, CheckTimeout, RemoteError):
                pass
    finally:
        session.close()


def _shapes(inputs: dict) -> str:
    return ", ".join(f"{n} {list(s)} {d}" for n, (s, d) in inputs.items())


def _observe(adapter, handle, framework: str, constructor: dict, inputs: dict) -> Observed:
    from .exitcodes import EXIT_FAILED
    arrays = draw(inputs)
    adapter.manual_seed(SEED)
    layer = adapter.build(adapter.construct(handle, constructor), arrays)
    slots = _slots(adapter, layer)
    out = adapter.call(layer, arrays)
    if not adapter.is_tensor(out):
        raise ScaffoldError(f"the layer's output is not one {framework} tensor: a contract checks a layer with a "
                            f"single tensor output", EXIT_FAILED)
    own = next((d for _, d in inputs.values() if d in FLOATS), None)
    dtypes, refused = _dtypes(adapter, layer, arrays, own) if own else ([], {})
    wrt = [i for i, a in enumerate(arrays) if is_floating(a.dtype)]
    grad_inputs, grad_slots = [], []
    if wrt or any(s.trainable for s in slots):
        cotangent = np.ones(adapter.numpy(out).shape, dtype=np.asarray(adapter.numpy(out)).dtype)
        got = adapter.vjp(layer, layer, arrays, wrt, cotangent)
        input_grads, state_grads = got.inputs, got.state
        names = list(inputs)
        grad_inputs = [names[i] for i in wrt if input_grads[i] is not None]
        grad_slots = [s.name for s in slots if s.trainable and state_grads.get(s.path) is not None]
    gaps = _gaps(adapter, layer, arrays, own, dtypes, wrt, [s.path for s in slots if s.name in grad_slots])
    return Observed(framework, slots, tuple(adapter.numpy(out).shape), adapter.dtype_name(out), dtypes, refused,
                    grad_inputs, grad_slots, gaps)


def _slots(adapter, layer) -> list:
    held = [(path, t, True) for path, t in adapter.trainable(layer).items()] + \
           [(path, t, False) for path, t in adapter.non_trainable(layer).items()]
    names = slot_names([path for path, _, _ in held])
    slots = []
    for (path, t, trainable), name in zip(held, names):
        value = np.asarray(adapter.numpy(t))
        init, finite = initial(value)
        slots.append(Slot(path, name, tuple(value.shape), adapter.dtype_name(t), trainable, init, finite))
    return slots


def slot_names(paths: list) -> list:
    """The contract's slot names for the layer's variables: a sublayer's only variable takes the sublayer's name
    (w1.weight -> w1), others their whole path (w1.weight, w1.bias -> w1_weight, w1_bias); '/' reads as '.'."""
    parts = [p.replace("/", ".").split(".") for p in paths]
    prefixes = [".".join(p[:-1]) for p in parts]
    out: list = []
    for p, prefix in zip(parts, prefixes):
        base = prefix if prefix and prefixes.count(prefix) == 1 else ".".join(p)
        name = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_") or "slot"
        name = name if re.match(r"[A-Za-z_]", name) else "s_" + name
        candidate, k = name, 1
        while candidate in out:
            k += 1
            candidate = f"{name}_{k}"
        out.append(candidate)
    return out


def initial(value: np.ndarray) -> tuple:
    """(the slot's ``init``, whether its values are finite): ones/zeros/a constant where every value is that,
    random for other floating values, reference (the reference's init_<slot>()) for other integer or bool ones."""
    floating = is_floating(value.dtype)
    v = value.astype(np.float64) if floating or value.dtype == bool else value
    finite = bool(np.all(np.isfinite(v))) if floating else True
    if v.size == 0 or np.all(v == 0):
        return "zeros", finite
    if np.all(v == 1):
        return "ones", finite
    flat = v.reshape(-1)
    if np.all(flat == flat[0]) and floating:
        return {"linspace": [float(flat[0]), float(flat[0])]}, finite
    return ("random" if floating else "reference"), finite


# the cases' scales, three draws each: the gaps are measured where the cases draw (the scaled case in 32 and 64 bits
# only: a 16-bit sum of ten times larger terms is the dtype's rounding, not the layer's)
PROBE_SCALES = (1.0, 1.0, 1.0, 10.0, 10.0, 10.0)
MARGIN = 8.0  # an atol is this many times the largest gap beyond the default tolerance


def _gaps(adapter, layer, arrays: list, own: str | None, dtypes: list, wrt: list, grad_paths: list) -> dict:
    """How far the layer's outputs and gradients in each dtype lie from the same layer's in float64 (its state and
    inputs first rounded to the dtype), beyond the default tolerance, on inputs drawn as the cases draw them:
    {("values" | "gradients", dtype): atol} where the default table's atol is too small for the layer's own
    rounding. What the contract's ``tolerances`` then allows a correct layer; the comments say it was measured."""
    from .boundary import ExecutorLost
    from .boundary.client import CheckTimeout
    from .tolerances import default
    rng = np.random.default_rng(SEED + 1)
    out_shape = np.asarray(adapter.numpy(adapter.call(layer, arrays))).shape
    worst: dict = {}
    for scale in PROBE_SCALES:
        drawn = [(rng.standard_normal(a.shape) * scale) if is_floating(a.dtype) else a for a in arrays]
        cotangent = rng.standard_normal(out_shape)
        for dtype in (d for d in dtypes if scale == 1.0 or d not in HALF):  # the scaled case: 32 and 64 bits
            try:
                low = layer if dtype == own else adapter.to_dtype(layer, dtype)
                x = [_cast(a, dtype) for a in drawn]
                ran = _run(adapter, low, x, wrt, _cast(cotangent, dtype), grad_paths)
                exact = _run(adapter, adapter.to_dtype(low, "float64"), [_cast(a, "float64") for a in x], wrt,
                             _cast(_cast(cotangent, dtype), "float64"), grad_paths)
            except (ExecutorLost, CheckTimeout):
                raise
            except Exception:  # no float64 copy, no gradient in this dtype: no measured tolerance
                continue
            for check in ("values", "gradients"):
                rtol, atol = default(check, dtype)
                for a, b in zip(ran[check], exact[check]):
                    if a is None or b is None:
                        continue
                    excess = float(np.max(np.abs(a - b) - rtol * np.abs(b), initial=0.0)) * MARGIN
                    if excess > atol:
                        worst[(check, dtype)] = max(worst.get((check, dtype), 0.0), _round_up(excess))
    return worst


def _cast(a, dtype: str):
    return a.astype(np_dtype(dtype)) if is_floating(a.dtype) else a


def _run(adapter, layer, inputs: list, wrt: list, cotangent, grad_paths: list) -> dict:
    """The layer's output and gradients (the differentiated inputs', then the slots'), in float64."""
    got = adapter.vjp(layer, layer, inputs, wrt, cotangent)
    out, grad_in, grad_state = got.output, got.inputs, got.state

    def read(t):
        return None if t is None else np.asarray(adapter.numpy(t)).astype(np.float64)
    return {"values": [read(out)],
            "gradients": [read(grad_in[i]) for i in wrt] + [read(grad_state.get(p)) for p in grad_paths]}


def _round_up(x: float) -> float:
    """``x`` rounded up to one significant digit (3.2e-4 -> 4e-4)."""
    import math
    e = math.floor(math.log10(x))
    return float(f"{math.ceil(x / 10 ** e)}e{e}")


def _dtypes(adapter, layer, arrays: list, own: str) -> tuple:
    """The floating dtypes the forward accepts: it runs with its state and input in that dtype and returns finite
    values of that dtype. ``own`` (the input's dtype) is tried on the layer as built."""
    from .boundary import ExecutorLost
    from .boundary.client import CheckTimeout
    ok, refused = [], {}
    for dtype in (own,) + tuple(d for d in TRIED_DTYPES if d != own):
        try:
            cast = layer if dtype == own else adapter.to_dtype(layer, dtype)
            if cast is None:
                refused[dtype] = f"{adapter.name} cannot cast this layer"
                continue
            out = adapter.call(cast, [a.astype(np_dtype(dtype)) if is_floating(a.dtype) else a for a in arrays])
            got = adapter.dtype_name(out)
            values = np.asarray(adapter.numpy(out)).astype(np.float64)
        except (ExecutorLost, CheckTimeout):
            raise
        except Exception as exc:  # the layer's own refusal in that dtype (RemoteError, NotApplicable)
            refused[dtype] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            continue
        if got != dtype:
            refused[dtype] = f"its output is {got}"
        elif not np.all(np.isfinite(values)):
            refused[dtype] = "its output is not finite"
        else:
            ok.append(dtype)
    return ok, refused


# -- the command --------------------------------------------------------------------------------------------
def _stub_module(stub: Path) -> str:
    """The dotted module path the run imports the stub by: from the current directory, where a run imports a
    contract's own reference module from."""
    import os
    try:
        rel = stub.resolve().relative_to(Path(os.getcwd()).resolve())
    except ValueError:
        raise _usage(f"-o {stub.parent}: write the contract under the current directory (its reference module "
                     f"is imported from there when the contract runs)") from None
    parts = list(rel.with_suffix("").parts)
    if not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise _usage(f"-o: the folders of {rel} must be Python names (the reference stub is imported as a module)")
    return ".".join(parts)


def run_command(impl: str, output: Path, reference: str | None, framework: str, state_map: dict,
                executor_python: list) -> str:
    """The command that runs the drafted contract."""
    import shlex
    words = ["python", "-m", "pytest", "--contract", str(output), "--impl", impl, "--framework", framework]
    for slot, path in state_map.items():
        words += ["--state-map", f"{slot}={path}"]
    for item in executor_python:
        words += ["--executor-python", item]
    return " ".join(shlex.quote(w) for w in words)


def new(impl: str, inputs: list, framework: str | None = None, reference: str | None = None,
        name: str | None = None, output: str | None = None, args: list = (), executor_python: list = (),
        force: bool = False) -> int:
    """Draft the contract (and the reference stub) and print how to run it; raises ScaffoldError."""
    from .contract import ContractError, load_contract
    from .exitcodes import EXIT_CONTRACT
    from .scaffold_text import contract_yaml, stub_module
    from .targets import UsageError, parse_pythons
    import os
    given, shapes = parse_args(list(args)), parse_inputs(list(inputs))
    try:
        pythons = parse_pythons(list(executor_python), os.getcwd())
    except UsageError as exc:
        raise _usage(str(exc)) from None
    name = contract_name(impl, name)
    path = Path(output or Path("contracts") / f"{name}.yaml")
    stub = None if reference else path.with_name(f"{path.stem}_reference.py")
    module = _stub_module(stub) if stub else None
    if reference is not None and ":" not in reference:
        raise _usage(f"--reference {reference!r}: expected MODULE:ATTR, e.g. otherpkg.layers:SwiGLU")
    existing = [str(p) for p in (path, stub) if p is not None and p.exists()]
    if existing and not force:
        raise _usage(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: pass --force to "
                     f"overwrite, or -o another path")
    found = detect(impl, framework, pythons.get(framework) if framework else None)
    fw = found["framework"]
    constructor = constructor_for(impl, found, given)
    seen = observe(impl, fw, pythons.get(fw), constructor, shapes)
    state_map = {s.name: s.path.replace("/", ".") for s in seen.slots if s.name != s.path}
    ref = {"impl": reference, "framework": fw} if reference else {"module": module}
    if reference and state_map:   # the reference's own names taken to be the layer's (a port of it): review them
        ref["state_map"] = [f"{slot}={name}" for slot, name in state_map.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(contract_yaml(name, impl, seen, constructor, shapes, ref))
    print(f"wrote {path}: {len(seen.slots)} state slot(s), dtypes {', '.join(seen.dtypes) or 'none'}")
    if stub is not None:
        stub.write_text(stub_module(name, impl, str(stub), seen, constructor, shapes))
        print(f"wrote {stub}: the numpy reference to fill in (forward"
              f"{', vjp' if seen.grad_inputs + seen.grad_slots else ''}; its docstrings say what each receives)")
    try:
        load_contract(path)
    except ContractError as exc:
        raise ScaffoldError(f"the drafted contract does not load (a fault of `new`, please report it):\n{exc}",
                            EXIT_CONTRACT) from None
    print("run it with:")
    print("  " + run_command(impl, path, reference, fw, state_map, list(executor_python)))
    return 0
