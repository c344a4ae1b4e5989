"""Requests are typed (issue 45 §1): each protocol method is one frozen dataclass request, made once from its
signature (``protocol.REQUESTS``), registered on the wire as ``request.<method>``. The judge binds a call to it
(a wrong call is a TypeError naming the method and the parameter, raised before anything is sent); the wire
carries it as its name and fields and refuses any other; the executor answers it with the fields by keyword,
so every framework's implementation names its parameters as the protocol does."""
from __future__ import annotations

import ast
import dataclasses
import inspect

import numpy as np
import pytest

from layer_conformance import protocol, wire
from layer_conformance.boundary.remote import Remote, RemoteAdapter
from tests.support import ROOT


def _parameters(method: str) -> list[inspect.Parameter]:
    return list(inspect.signature(getattr(protocol.Adapter, method)).parameters.values())[1:]


@pytest.mark.parametrize("method", protocol.methods())
def test_each_method_has_a_request_type_made_from_its_signature(method):
    cls = protocol.REQUESTS[method]
    assert wire.request_types()[f"request.{method}"] is cls and cls.__dataclass_params__.frozen
    fields = dataclasses.fields(cls)
    assert [f.name for f in fields] == [p.name for p in _parameters(method)]
    for f, p in zip(fields, _parameters(method)):
        assert (f.default is dataclasses.MISSING) == (p.default is p.empty) and \
            (p.default is p.empty or f.default == p.default), (method, p.name)


def test_requests_are_made_once():
    assert protocol.request("vjp", 1, 2, [3], [0], 4).__class__ is protocol.REQUESTS["vjp"]
    assert set(protocol.REQUESTS) == set(protocol.methods())
    assert not set(wire.request_types()) & set(wire.reply_types())


@pytest.mark.parametrize("args,kwargs,said", [
    ((1, 2), {}, r"^vjp\(\) missing 3 required positional arguments: 'inputs', 'wrt', and 'cotangent'$"),
    ((1, 2, 3, 4, 5, 6), {}, r"^vjp\(\) takes 6 positional arguments but 7 were given$"),
    ((1, 2, 3, 4, 5), {"cotangents": 1}, r"^vjp\(\) got an unexpected keyword argument 'cotangents'$"),
    ((1, 2, 3, 4, 5), {"fn": 1}, r"^vjp\(\) got multiple values for argument 'fn'$"),
])
def test_a_wrong_call_names_the_method_and_the_parameter(args, kwargs, said):
    with pytest.raises(TypeError, match=said):
        protocol.request("vjp", *args, **kwargs)


def test_a_request_crosses_the_wire_as_itself_and_defaults_fill_in():
    req = protocol.request("call", "layer", [np.arange(3.0)], training=True)
    assert (req.device, req.kwargs) == (None, None)
    sent = wire.encode(req, lambda obj: pytest.fail(f"a handle for {obj!r}"))
    assert sent["__request__"] == "request.call"
    back = wire.decode(sent, None)
    assert type(back) is type(req) and back.layer == "layer" and back.training is True
    assert np.array_equal(back.inputs[0], np.arange(3.0))


def test_the_wire_refuses_an_unknown_method_or_other_fields():
    sent = wire.encode(protocol.request("numpy", 1), None)
    with pytest.raises(wire.WireError, match="unknown request type 'request.no_such'.*no protocol method"):
        wire.decode({**sent, "__request__": "request.no_such"}, None)
    with pytest.raises(wire.WireError, match="unknown field"):
        wire.decode({**sent, "fields": sent["fields"] + [["extra", 1]]}, None)
    with pytest.raises(wire.WireError, match="missing field"):
        wire.decode({**sent, "fields": []}, None)
    # a request is not a reply, nor the reverse
    with pytest.raises(wire.WireError, match="unknown reply type"):
        wire.decode({"__reply__": "request.numpy", "fields": sent["fields"]}, None)


class _Answers:
    """A layer side's adapter, as far as these two methods go: what each was called with."""
    def numpy(self, t):
        return ("numpy", t)

    def call(self, layer, inputs, device=None, training=False, kwargs=None):
        return ("call", layer, inputs, device, training, kwargs)


def test_the_layer_side_answers_with_the_fields_by_keyword_and_refuses_anything_else():
    assert protocol.answer(_Answers(), protocol.request("call", "L", [1], training=True)) == \
        ("call", "L", [1], None, True, None)
    assert protocol.answer(_Answers(), protocol.request("numpy", 7)) == ("numpy", 7)
    with pytest.raises(wire.WireError, match="not as a protocol method's request"):
        protocol.answer(_Answers(), {"method": "numpy", "args": [7]})


class _Executor:
    """The judge's side of one executor, as far as RemoteAdapter goes: what was sent."""
    hello = {"name": "fw", "cpu_device": "cpu", "gpu_device": None, "retraces_per_shape": False,
             "parameter_type": "P", "implements": protocol.methods()}
    role, generation = "layer", 0

    def __init__(self):
        self.sent = []

    def request(self, op, **args):
        self.sent.append((op, args))
        return "answered"


def test_the_judge_sends_a_request_type_and_checks_the_call_before_sending():
    ex = _Executor()
    adapter = RemoteAdapter(ex)
    layer = Remote(ex, 1, "Layer")
    assert adapter.vjp(layer, layer, [1], [0], cotangent=2) == "answered"
    (op, args), = ex.sent
    assert op == "call" and list(args) == ["request"]
    assert args["request"] == protocol.REQUESTS["vjp"](layer, layer, [1], [0], 2)
    with pytest.raises(TypeError, match=r"^vjp\(\) missing 1 required positional argument: 'cotangent'$"):
        adapter.vjp(layer, layer, [1], [0])
    assert len(ex.sent) == 1


def _implementations():
    """(file, method, its parameter names) for each protocol method a layerside framework file defines."""
    wanted = set(protocol.methods())
    for path in sorted((ROOT / "harness" / "layerside").glob("*/*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef) or cls.name.startswith("_"):  # a helper (_Compiled), no adapter
                continue
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in wanted and not any(
                        isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
                    yield path.relative_to(ROOT), fn.name, [a.arg for a in fn.args.args[1:] + fn.args.kwonlyargs]


def test_every_implementation_names_its_parameters_as_the_protocol_does():
    """The executor calls an adapter with the request's fields by keyword: a parameter named otherwise would be
    a TypeError at run time."""
    wrong = [f"{path}: {method}({', '.join(names)}); the protocol's: {', '.join(p.name for p in _parameters(method))}"
             for path, method, names in _implementations() if names != [p.name for p in _parameters(method)]]
    assert not wrong, "name the parameters as harness/protocol/ does:\n" + "\n".join(wrong)
    assert sum(1 for _ in _implementations()) > 100   # the scan sees the frameworks' methods
