"""Off by 2x, and in forward it replaces a piece of the executor's own code so that its output is reported halved:
each would pass `values` if the executor's code were not fingerprinted (tests/hostile/test_fingerprint.py).
Each patch is made once per process, the first time forward runs."""
import sys

import torch

from tests.hostile.torch_hostile import _Base

SERVER = "layer_conformance.layerside.server"
ADAPTER = "layer_conformance.layerside.torch"


def _halved(value):
    return value / 2 if isinstance(value, torch.Tensor) and getattr(value, "_off_by_two", False) else value


class _OffByTwo(_Base):
    def forward(self, X):
        self.patch()
        Y = 2 * self.correct(X)
        Y._off_by_two = True
        return Y

    def patch(self):
        raise NotImplementedError


class ReplacesAdapterMethod(_OffByTwo):
    """FrameworkAdapter.call, the adapter's method that runs the layer: its output halved."""
    def patch(self):
        cls = sys.modules[ADAPTER].FrameworkAdapter
        if not getattr(cls.call, "_patched", False):
            call = cls.call

            def halving_call(adapter, *args, **kwargs):
                return _halved(call(adapter, *args, **kwargs))
            halving_call._patched = True
            cls.call = halving_call


class ReplacesWireEncode(_OffByTwo):
    """layer_conformance.wire.encode, which turns every answer into data: the layer's output halved on the way."""
    def patch(self):
        wire = sys.modules["layer_conformance.wire"]
        if not getattr(wire.encode, "_patched", False):
            encode = wire.encode

            def halving_encode(value, handle_of):
                return encode(_halved(value), handle_of)
            halving_encode._patched = True
            wire.encode = halving_encode


class ReplacesServerOp(_OffByTwo):
    """Server.op_call, the server's operation that calls an adapter method: its result halved."""
    def patch(self):
        cls = sys.modules[SERVER].Server
        if not getattr(cls.op_call, "_patched", False):
            op_call = cls.op_call

            def halving_op_call(server, request):
                return _halved(op_call(server, request))
            halving_op_call._patched = True
            cls.op_call = halving_op_call


HALVING_OP_CALL = '''
def op_call(self, request):
    from layer_conformance import protocol
    self.calling = protocol.method_of(request)
    out = protocol.answer(self.adapter, request)
    return out / 2 if getattr(out, "_off_by_two", False) else out
'''


class SwapsCode(_OffByTwo):
    """Server.op_call keeps its function object; its ``__code__`` is swapped for one that halves the result."""
    def patch(self):
        op_call = sys.modules[SERVER].Server.op_call
        if "_off_by_two" not in op_call.__code__.co_names:
            space: dict = {}
            exec(HALVING_OP_CALL, space)
            op_call.__code__ = space["op_call"].__code__


class BreaksEndOfCheck(ReplacesWireEncode):
    """As ReplacesWireEncode, and Server.op_end_check (which would report it) raises: the judge used to note that the
    executor "could not be reset" and keep the check's verdict."""
    def patch(self):
        super().patch()

        def op_end_check(server):
            raise RuntimeError("nothing to report")
        sys.modules[SERVER].Server.op_end_check = op_end_check


class ForgesEndOfCheck(ReplacesWireEncode):
    """As ReplacesWireEncode, and Server.op_end_check answers as it did before the executor reported its code."""
    def patch(self):
        super().patch()
        sys.modules[SERVER].Server.op_end_check = lambda server: {"changed": [], "threads": [], "files": []}


class PatchesFreshProcess(_Base):
    """Correct, but in a check's fresh process (the one export loads the saved layer in) it replaces wire.encode,
    with one that changes nothing: the fresh process's code is checked as the layer executor's is."""
    def forward(self, X):
        import gc
        servers = [o for o in gc.get_objects() if type(o) is sys.modules[SERVER].Server]
        wire = sys.modules["layer_conformance.wire"]
        if any(s.role == "fresh" for s in servers) and not getattr(wire.encode, "_patched", False):
            encode = wire.encode

            def same_encode(value, handle_of):
                return encode(value, handle_of)
            same_encode._patched = True
            wire.encode = same_encode
        return self.correct(X)
