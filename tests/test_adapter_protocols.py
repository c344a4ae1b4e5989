"""The adapters' conformance suite (issue 45 §6): every protocol area (``layer_conformance.protocol.AREAS``) against
every installed framework, through the path a run takes (the layer's executor and its ``RemoteAdapter``). Passing
it is what "a framework is supported" means: docs/adding.md's "fill a folder until the suite passes".

Each (framework, area) test calls every method of the area's protocol once, with small inputs, on a tiny layer
(the bundled ``rmsnorm``, 16 rows of 8) or function (the bundled ``linear_vjp``, whose ``x`` and ``b`` are alike:
what ``aliased_vjp`` needs), and asserts that the reply is well-formed (its type, shapes and dtypes), or that the
call raised ``NotApplicable`` with a code of ``check_catalog.NA_REASONS`` that this framework may give (a limit
the catalogue lists for it, or one said of the layer). A method the framework's adapter does not implement is
allowed only where LACKS lists it with the reason.

Tiers: the core area of each framework is fast (one executor per framework, shared by the module); the other
areas are ``full``."""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

from layer_conformance import protocol
from layer_conformance.boundary import Session
from layer_conformance.check_catalog import NA_REASONS
from layer_conformance.contract import bundled_contracts, load_contract
from layer_conformance.frameworks import FRAMEWORKS
from layer_conformance.protocol.autodiff import Gradients, SecondOrder, Tangents
from layer_conformance.protocol.layout import AliasedGradient
from layer_conformance.runner import context_for
from layer_conformance.targets import bundled_impl
from tests.support import executor_pythons

# (framework, method) -> why the framework's adapter has no such method (the protocol's placeholder answers)
LACKS = {
    **{(fw, "compilation_cache"): "only JAX's adapter keeps compiled programs in a directory (its persistent "
                                  "compilation cache) that a target's processes share"
       for fw in ("torch", "tensorflow", "mxnet")},
}
# methods the suite calls no more than the base class answers (their default is the answer): (method, why)
NOT_ASKED = {
    "configure_early": "runs once, before the framework's first op, when the executor starts",
}
ROWS, WIDTH = 16, 8


def _get(reply, key):
    """A reply's field, whether the reply is typed (a protocol dataclass) or a plain dict."""
    return reply[key] if isinstance(reply, dict) else getattr(reply, key)


class Kit:
    """One framework's adapter, as a check sees it, with the tiny layer and function and what was asked."""

    def __init__(self, framework: str, layer_ctx, function_ctx):
        self.fw = framework
        self.lctx = layer_ctx
        self._fctx = function_ctx   # made on first use: another implementation needs a layer executor of its own
        self.X = [np.random.default_rng(0).normal(size=(ROWS, WIDTH)).astype(np.float32)]
        self.cot = np.random.default_rng(1).normal(size=(ROWS, WIDTH)).astype(np.float32)
        self.fcot = np.random.default_rng(2).normal(size=(4,)).astype(np.float32)
        self.asked: set[str] = set()
        self._layer = None

    @property
    def ad(self):
        return self.lctx.adapter

    @property
    def fctx(self):
        if callable(self._fctx):
            self._fctx = self._fctx()
        return self._fctx

    @property
    def fin(self):
        return self.fctx.first_inputs()   # W [4, 4], x [4], b [4]

    @property
    def layer(self):
        if self._layer is None:
            self._layer = self.lctx.new_layer()
        return self._layer

    @property
    def fn(self):
        return self.fctx.callable(None)

    def ask(self, method: str, *args, adapter=None, **kwargs):
        """``method``'s reply, or None where it said n/a (checked: a reason this framework may give); ``adapter``:
        the function's (another executor's) rather than the layer's."""
        self.asked.add(method)
        if (self.fw, method) in LACKS:
            assert not self.ad.implements(method), f"{self.fw} implements {method} now: drop it from LACKS"
            return None
        try:
            return getattr(adapter or self.ad, method)(*args, **kwargs)
        except protocol.NotApplicable as exc:
            reason = NA_REASONS.get(exc.code)
            assert reason is not None, f"{self.fw} {method}: n/a without a known code: {exc.code!r} ({exc})"
            assert reason.source == "layer" or self.fw in reason.frameworks, \
                f"{self.fw} {method}: n/a for {exc.code!r}, not a limit of {self.fw} ({exc})"
            return None

    def tensor_like(self, out, shape, what):
        """``out`` is a tensor of ``shape`` (None: any length on that axis), finite; its values."""
        assert self.ad.is_tensor(out), f"{self.fw} {what}: {out!r} is no tensor"
        value = self.ad.numpy(out)
        assert len(value.shape) == len(shape) and all(n in (None, m) for n, m in zip(shape, value.shape)), \
            (self.fw, what, value.shape, shape)
        assert np.isfinite(value).all(), (self.fw, what)
        return value

    def grads_like(self, grads, shapes, what):
        assert len(grads) == len(shapes), (self.fw, what, grads)
        for g, shape in zip(grads, shapes):
            if shape is not None and g is not None:
                self.tensor_like(g, shape, what)


# -- each area: every method of its protocol, once -----------------------------------------------------------------

def _core_tensors(k: Kit):
    t = k.ask("tensor", k.X[0])
    assert k.ask("is_tensor", t) is True and k.ask("is_tensor", [1, 2]) is False
    assert np.array_equal(k.ask("numpy", t), k.X[0])
    assert k.ask("dtype_name", t) == "float32"
    assert isinstance(k.ask("device_of", t), str)
    devices = k.ask("devices")
    assert isinstance(devices, list) and all(isinstance(d, str) for d in devices), devices
    assert k.ask("is_virtual", k.ad.cpu_device) is False
    assert k.ask("implements", "call") is True


def _core_building(k: Kit):
    assert k.ask("owns", k.lctx.impl) is True
    layer = k.ask("construct", k.lctx.impl, k.lctx.constructor_args())
    layer = k.ask("build", layer, k.X)
    k.tensor_like(k.ask("call", layer, k.X), (ROWS, WIDTH), "call")
    k.tensor_like(k.ask("call", layer, k.X, training=True), (ROWS, WIDTH), "call in training")
    impl, built = k.ask("built_with", k.lctx.impl, k.lctx.constructor_args(), k.X)
    k.tensor_like(k.ask("call", built, k.X), (ROWS, WIDTH), "built_with's layer")
    assert k.ask("as_callable", k.lctx.impl) is not None   # a layer's class as it is (a function: area_autodiff)
    native = k.lctx.contract.native.get(k.fw)
    if native is not None and native.class_path:
        cls = k.lctx.import_native(native.class_path)
        args = {a: k.lctx.contract.resolve_arg(v) for a, v in native.args.items()}
        made = k.ask("build", k.ask("construct_native", cls, args), k.X)
        k.tensor_like(k.ask("call", made, k.X), (ROWS, WIDTH), "the native layer")
    else:
        k.asked.add("construct_native")   # the contract names no native layer here (MXNet: none in gluon.nn)


def _core_state(k: Kit):
    trainable, others = k.ask("trainable", k.layer), k.ask("non_trainable", k.layer)
    assert isinstance(trainable, dict) and len(trainable) == 1, trainable
    assert isinstance(others, dict) and not others, others
    (name,) = trainable
    assert len(k.ask("optimizer_view", k.layer)) == 1
    assert k.ask("untracked", k.layer) == {}
    k.ask("assign", k.layer, name, np.full(WIDTH, 2.0, np.float32))
    saved = k.ask("serialized_state", k.layer)
    assert len(saved) == 1 and np.allclose(np.asarray(next(iter(saved.values()))), 2.0), saved
    fresh = k.lctx.new_layer()
    k.ask("round_trip", k.layer, fresh)
    assert np.allclose(np.asarray(next(iter(k.ask("serialized_state", fresh).values()))), 2.0)
    state = k.ask("export_state", k.layer)
    k.ask("load_state", k.lctx.new_layer(), state, strict=True)
    altered = k.ask("alter_saved", k.layer, state, drop=next(iter(saved)))
    with pytest.raises(Exception):   # a strict load of a state without its one slot must raise (strict_loading)
        k.ad.load_state(k.lctx.new_layer(), altered, strict=True)


def _core_containers(k: Kit):
    seq = k.ask("sequential", k.layer, WIDTH)
    k.tensor_like(k.ask("call", seq, k.X), (ROWS, None), "sequential")   # dense layers around it: their width
    nested = k.ask("nest", k.layer, dense=(WIDTH, WIDTH))
    k.tensor_like(k.ask("call", nested, k.X, training=True), (ROWS, WIDTH), "nest")
    assert k.ask("manual_seed", 0) is None
    moved = k.ask("move", k.layer, k.ad.cpu_device, rebuild=k.lctx.rebuilder({}, k.layer))
    k.tensor_like(k.ask("call", moved, k.X), (ROWS, WIDTH), "moved")
    saved = k.ask("save_globals")
    changed = k.ask("restore_globals", saved)
    assert isinstance(changed, list) and not changed, changed


def area_core(k: Kit):
    _core_tensors(k)
    _core_building(k)
    _core_state(k)
    _core_containers(k)


def area_autodiff(k: Kit):
    got = k.ask("vjp", k.layer, k.layer, k.X, [0], k.cot)
    assert isinstance(got, Gradients), got
    k.tensor_like(got.output, (ROWS, WIDTH), "vjp's output")
    k.grads_like(got.inputs, [(ROWS, WIDTH)], "vjp's input gradients")
    state = got.state
    assert isinstance(state, dict) and len(state) == 1 and all(g is not None for g in state.values()), state
    answer = k.ask("jvp", k.layer, k.layer, k.X, [np.ones_like(k.X[0])])
    if answer is not None:
        assert isinstance(answer, Tangents), answer
        k.tensor_like(answer.output, (ROWS, WIDTH), "jvp's output")
        k.tensor_like(answer.tangent, (ROWS, WIDTH), "jvp's tangent")
    f = k.fctx.adapter
    fn = k.ask("as_callable", k.fctx.impl, adapter=f)
    k.tensor_like(f.call(fn, k.fin), (4,), "a function's call")
    assert k.ask("custom_rule_recorded", fn, k.fin, [0, 1, 2], adapter=f) in (True, False, None)
    second = k.ask("hvp", k.layer, k.layer, k.X, [0], k.cot, [np.ones_like(k.X[0])])
    if second is not None:
        assert isinstance(second, SecondOrder), second
        k.grads_like(second.inputs, [(ROWS, WIDTH)], "hvp")


def area_compile(k: Kit):
    compilers = k.ask("compilers")
    assert isinstance(compilers, list) and compilers and all(isinstance(c, str) for c in compilers), compilers
    compiled = k.ask("compile", k.layer, k.layer, compilers[0])
    if compiled is None:   # n/a: nothing compiled to ask about
        k.asked.update({"compiled_call", "compiled_vjp", "compile_stats"})
    else:
        k.tensor_like(k.ask("compiled_call", compiled, k.X), (ROWS, WIDTH), "compiled_call")
        got = k.ask("compiled_vjp", compiled, k.layer, k.X, [0], k.cot)
        assert isinstance(got, Gradients), got
        k.grads_like(got.inputs, [(ROWS, WIDTH)], "compiled_vjp")
        stats = k.ask("compile_stats", compiled)
        assert isinstance(_get(stats, "traces"), int) and isinstance(_get(stats, "graphs"), int), stats
    k.tensor_like(k.ask("eager_call", k.layer, k.X), (ROWS, WIDTH), "eager_call")
    got = k.ask("eager_vjp", k.layer, k.layer, k.X, [0], k.cot)
    assert isinstance(got, Gradients), got
    k.grads_like(got.inputs, [(ROWS, WIDTH)], "eager_vjp")
    k.ask("compilation_cache", tempfile.mkdtemp(prefix="conformance-suite-cache-"))


def area_export(k: Kit):
    formats = k.ask("export_formats", k.layer)
    if formats is None:
        k.asked.update({"export_save", "export_load"})
        return
    assert isinstance(formats, list) and formats and all(isinstance(f, str) for f in formats), formats
    workdir = tempfile.mkdtemp(prefix="conformance-suite-export-")
    path = f"{workdir}/{formats[0].replace('/', '_')}"
    notes = k.ask("export_save", k.layer, formats[0], [k.X], path)
    if notes is None:
        k.asked.add("export_load")
        return
    assert isinstance(_get(notes, "gradients"), str), notes
    with k.lctx.fresh_adapter() as fresh:
        fn, _ = fresh.export_load(formats[0], path, k.lctx.impl_spec, k.lctx.constructor_args(), [k.X])
        value = fresh.numpy(fresh.call(fn, k.X))
    k.asked.add("export_load")
    assert value.shape == (ROWS, WIDTH), value.shape


def area_precision(k: Kit):
    wide = k.ask("to_float64", k.layer)
    if wide is not None:
        assert k.ad.dtype_name(k.ad.call(wide, [k.X[0].astype(np.float64)])) == "float64"
    half = k.ask("to_dtype", k.layer, "float16")
    if half is not None:
        assert k.ad.dtype_name(k.ad.call(half, [k.X[0].astype(np.float16)])) == "float16"
    policies = k.ask("mixed_precision_policies", k.lctx.impl)
    if policies is None:
        k.asked.add("mixed_precision_run")
        return
    assert isinstance(policies, list) and policies, policies
    usable = [p for p in policies if _get(p, "not_applicable") is None and not _get(p, "isolated")]
    if not usable:
        k.asked.add("mixed_precision_run")
        return
    run = k.ask("mixed_precision_run", k.lctx.impl, k.lctx.constructor_args(), k.X, _get(usable[0], "policy"),
                cotangent=k.cot, wrt=[0])
    if run is not None:
        assert isinstance(_get(run, "output_dtype"), str), run
        assert np.asarray(_get(run, "output")).shape == (ROWS, WIDTH), run
        assert len(_get(run, "input_dtypes")) == 1, run


def area_batching(k: Kit):
    out = k.ask("vmap_call", k.layer, k.layer, [k.X[0].reshape(2, ROWS // 2, WIDTH)], [0], 0)
    if out is not None:
        k.tensor_like(out, (2, ROWS // 2, WIDTH), "vmap_call")
    batched = [np.stack([a, a * 0.5]) for a in k.fin]
    cot = np.stack([k.fcot, k.fcot])
    grads = k.ask("vmap_vjp", k.fn, batched, [0, 0, 0], 0, [0, 1, 2], cot, adapter=k.fctx.adapter)
    if grads is not None:
        for way in ("grad_of_vmap", "vmap_of_grad"):
            got = _get(grads, way)
            if not isinstance(got, protocol.NotApplicablePart):
                # one per input, each batched (linear_vjp's contract says its inputs carry no batch axis: the
                # suite asks only for the reply's form, the batching check for the values)
                assert len(got) == len(batched), (k.fw, way, got)
                for g in got:
                    assert k.ad.is_tensor(g) and k.ad.numpy(g).shape[0] == 2, (k.fw, way, g)


def area_construction(k: Kit):
    parts = k.ask("construction_run", k.lctx.impl, k.lctx.constructor_args(), k.X,
                  {"trainable": 1, "non_trainable": 0, "reset_parameters": "optional"})
    if parts is None:
        return
    assert isinstance(parts, list) and parts, parts
    for part in parts:
        assert isinstance(_get(part, "part"), str), part
        if _get(part, "not_applicable") is None:
            assert not _get(part, "problems"), (k.fw, part)   # the bundled layer builds alike every way


def area_layout(k: Kit):
    layouts = k.ask("layouts", k.X)
    if layouts is not None:
        assert isinstance(layouts, list) and all(isinstance(s, str) for s in layouts), layouts
    out = k.ask("layout_vjp", k.layer, k.layer, k.X, [0], k.cot, (layouts or ["contiguous"])[0])
    if out is not None:
        assert isinstance(out, Gradients), out
        k.grads_like(out.inputs, [(ROWS, WIDTH)], "layout_vjp")
    aliased = k.ask("aliased_vjp", k.fn, k.fin, 1, 2, k.fcot, adapter=k.fctx.adapter)
    if aliased is not None:
        assert isinstance(aliased, AliasedGradient), aliased
        k.tensor_like(aliased.output, (4,), "aliased_vjp's output")
        k.tensor_like(aliased.gradient, (4,), "aliased_vjp's gradient")
    changes = k.ask("input_changes", k.layer, k.layer, k.X, [0], k.cot)
    if changes is not None:
        assert tuple(_get(changes, "forward")) == () and tuple(_get(changes, "backward")) == (), changes
        k.grads_like(_get(changes, "input_grads"), [(ROWS, WIDTH)], "input_changes")


def area_shapes(k: Kit):
    ways = k.ask("abstract_outputs", k.layer, k.layer, k.X)
    if ways is not None:
        assert isinstance(ways, list) and ways, ways
        for way in ways:
            if _get(way, "not_applicable") is None:
                assert tuple(_get(way, "shape")) == (ROWS, WIDTH) and _get(way, "error") is None, way
    batches = [k.X, [np.concatenate([k.X[0], k.X[0]])]]   # a doubled batch, as the abstract check runs it
    sym = k.ask("symbolic_batch", k.layer, k.layer, batches, [True], 0)
    if sym is not None:
        outs = _get(sym, "outputs")
        assert [np.asarray(o).shape for o in outs] == [(ROWS, WIDTH), (2 * ROWS, WIDTH)], sym


AREA_TESTS = {name: globals()[f"area_{name}"] for name in protocol.AREAS}


def _protocol_methods(area: str) -> set[str]:
    return {m for m, v in vars(protocol.AREAS[area]).items() if callable(v) and not m.startswith("_")}


@pytest.fixture(scope="module")
def kits(sessions):
    """``kits(framework)``: the framework's Kit, made once per module: the layer in the session's executors, the
    function in a Session of the module's own (one implementation per layer executor)."""
    made = {}

    def get(framework):
        if framework not in made:
            contracts = bundled_contracts()
            layer = context_for(load_contract(contracts["rmsnorm"]), bundled_impl(framework, "rmsnorm"),
                                framework, session=sessions(framework))

            def function():
                own[framework] = Session(executor_pythons(framework))
                return context_for(load_contract(contracts["linear_vjp"]), bundled_impl(framework, "linear_vjp"),
                                   framework, session=own[framework])
            made[framework] = Kit(framework, layer, function)
        return made[framework]
    own = {}
    yield get
    for session in own.values():
        session.close()


def _exercise(kits, framework, area):
    k = kits(framework)
    k.asked = set()
    AREA_TESTS[area](k)
    unasked = _protocol_methods(area) - k.asked - set(NOT_ASKED)
    assert not unasked, f"the suite's {area} area asked {framework} nothing of {sorted(unasked)}"


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_core(kits, framework):
    _exercise(kits, framework, "core")


@pytest.mark.full
@pytest.mark.parametrize("area", [a for a in protocol.AREAS if a != "core"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_area(kits, framework, area):
    _exercise(kits, framework, area)


def test_the_suite_has_one_exercise_per_area_and_its_tables_name_real_methods():
    assert set(AREA_TESTS) == set(protocol.AREAS)
    every = set(protocol.methods())
    assert {m for _, m in LACKS} <= every and set(NOT_ASKED) <= every
    assert {fw for fw, _ in LACKS} <= set(FRAMEWORKS)
    # the tiny layer and function are bundled for every framework
    assert all(bundled_impl(fw, c) for fw in FRAMEWORKS for c in ("rmsnorm", "linear_vjp"))
