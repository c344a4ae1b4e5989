"""Broken MXNet Gluon 1.9.1 layers, one per known mistake: each layer is a correct one of
tests/mutants/base_mxnet.py (or a bundled reference) with the method its mistake lives in overridden. Each is
caught in tests/test_mutants.py."""
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
import numpy as np  # noqa: E402
from mxnet import gluon, init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

from layer_conformance.reference_impls.mxnet.causal_mask import CausalMask  # noqa: E402
from layer_conformance.reference_impls.mxnet.rmsnorm import RMSNorm as _RMSNorm  # noqa: E402
from layer_conformance.reference_impls.mxnet.round_ste import RoundSTE  # noqa: E402
from tests.mutants.base_mxnet import RMSNorm  # noqa: E402
from tests.mutants.catalogue import Mutant  # noqa: E402


class GainAttributeParameter(RMSNorm):
    """The 2.0 style from the seed: a gluon.Parameter assigned as a plain attribute. On 1.9.1 it
    is not in collect_params(), so initialize() skips it and no Trainer sees it."""
    def make_gain(self, d):
        self.gain = gluon.Parameter('gain', shape=(d,), init=init.One())


class GainInList(RMSNorm):
    """The gain inside a plain Python list: also invisible to collect_params()."""
    def make_gain(self, d):
        self.weights = [gluon.Parameter('gain', shape=(d,), init=init.One())]

    def forward(self, X):
        return self.weights[0].data(X.context) * X / self.rms(X)


class EpsOutsideSqrt(RMSNorm):
    """x / (sqrt(mean x^2) + eps): right for large rows, wrong where mean square ~ eps."""
    def rms(self, X):
        return nd.sqrt((X ** 2).mean(axis=-1, keepdims=True)) + self.eps


class BatchMeanSquare(RMSNorm):
    """RMSNorm with `.mean()` left without its axis: one mean square over the whole batch, a batch statistic
    that mixes every example into every other's output."""
    def rms(self, X):
        return nd.sqrt((X ** 2).mean() + self.eps)


def _triu(max_len):
    return np.triu(np.ones((max_len, max_len)), 1)


class MaskAsParameter(CausalMask):
    """The mask as an ordinary Parameter (grad_req 'write'): a Trainer would update it."""
    def __init__(self, max_len, **kwargs):
        nn.Block.__init__(self, **kwargs)
        with self.name_scope():
            self.mask = self.params.get('mask', shape=(max_len, max_len), init=init.Constant(_triu(max_len)))


class MaskPlainArray(CausalMask):
    """The mask as a plain NDArray attribute: reset_ctx skips it (it stays on cpu(0), where MXNet
    silently computes with it) and save_parameters omits it."""
    def __init__(self, max_len, **kwargs):
        nn.Block.__init__(self, **kwargs)
        self.mask = nd.array(_triu(max_len), dtype='bool')

    def forward(self, scores):
        T = scores.shape[-1]
        mask = self.mask[:T, :T].astype(scores.dtype)
        mask = nd.broadcast_to(mask.reshape((1,) * (scores.ndim - 2) + (T, T)), scores.shape)
        return nd.where(mask, nd.full(scores.shape, -np.inf, ctx=mask.context, dtype=scores.dtype), scores)


class MaskNotAttribute(CausalMask):
    """get_constant without assigning the result to an attribute: in collect_params(), but
    save_parameters (which walks attributes) leaves it out."""
    def __init__(self, max_len, **kwargs):
        nn.Block.__init__(self, **kwargs)
        with self.name_scope():
            self.params.get_constant('mask', nd.array(_triu(max_len), dtype='bool'))

    @property
    def mask(self):
        return self.params.get('mask')


_shared_ste = RoundSTE()


def ste_reused_instance(w):
    """One autograd.Function instance for every call; each instance is single-use."""
    return _shared_ste(w)


def ste_forward_called_directly(w):
    """Calls forward instead of the Function: no custom node, so backward never runs."""
    return RoundSTE().forward(w)


class STEDoubled(RoundSTE):
    """A wrong surrogate: the gradient doubled."""
    def backward(self, grad_output):
        return 2 * grad_output


class LoadIgnoresKeys(_RMSNorm):
    """A load_parameters override that always passes allow_missing=True and ignore_extra=True:
    a parameter file of another layer loads silently."""
    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False, **kwargs):
        super().load_parameters(filename, ctx=ctx, allow_missing=True, ignore_extra=True, **kwargs)


class GainUnitsFlattened(RMSNorm):
    """RMSNorm that leaves its gain's size to deferred initialisation (shape (0,), as nn.Dense(in_units=0) does)
    and infers it the way nn.Dense(flatten=True) infers in_units, from every axis after the first: right when the
    first call is [batch, d], but a first call on [batch, time, d] makes a gain of time * d, and every later call
    fails. A build whose first call is [batch, d] cannot tell."""
    def make_gain(self, d):
        self.gain = self.params.get('gain', shape=(0,), init=init.One(), allow_deferred_init=True)

    def forward(self, X):
        if not self.gain._data:
            self.gain.shape = (int(np.prod(X.shape[1:])),)
            self.gain._finish_deferred_init()
        return super().forward(X)


class DropsNaNRows(nn.HybridBlock):
    """HybridBlock RMSNorm that drops the examples holding a NaN (contrib.boolean_mask on the batch axis) instead
    of letting the NaN through: on clean data right, eagerly and hybridized (the cached op runs an operator whose
    output shape depends on the values), but the output's shape is no longer a function of the input's, so MXNet's
    shape inference (a following layer's deferred initialisation, Module.bind, an exported graph's consumer)
    cannot give it."""
    def __init__(self, d, eps=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.eps = eps
        with self.name_scope():
            self.gain = self.params.get('gain', shape=(d,), init=init.One())

    def hybrid_forward(self, F, X, gain):
        clean = F.min((X == X).reshape((0, -1)), axis=1)  # 1 for an example without NaN (NaN != NaN)
        X = F.contrib.boolean_mask(X, clean)
        ms = F.mean(F.square(X), axis=-1, keepdims=True)
        return F.broadcast_mul(F.broadcast_div(X, F.sqrt(ms + self.eps)), gain)


M = "tests.mutants.mxnet_mutants"
MUTANTS = [
    Mutant("mxnet", "rmsnorm", f"{M}:GainAttributeParameter", "parameters",
           "untracked attribute 'gain' (gluon.Parameter [8])", blocked=('abstract', 'aliasing', 'batching', 'compiled', 'composition', 'device_parity', 'devices', 'export', 'gradients', 'properties', 'serialization', 'strict_loading', 'values')),
    Mutant("mxnet", "rmsnorm", f"{M}:GainInList", "parameters", "untracked attribute 'weights[0]'", blocked=('abstract', 'aliasing', 'batching', 'compiled', 'composition', 'device_parity', 'devices', 'export', 'gradients', 'properties', 'serialization', 'values')),
    Mutant("mxnet", "rmsnorm", f"{M}:EpsOutsideSqrt", "values", "case 'edge_rows'", blocked=('gradients', 'properties')),
    # written by analogy with EpsOutsideSqrt (values blocks gradients and properties); MXNet has no vectorising
    # transform, so batching's per-example runs catch it
    Mutant("mxnet", "rmsnorm", f"{M}:BatchMeanSquare", "batching", "changed when example 0 was perturbed",
           blocked=('values', 'gradients', 'properties')),
    Mutant("mxnet", "causal_mask", f"{M}:MaskAsParameter", "buffers", "is registered as trainable", blocked=('parameters',)),
    Mutant("mxnet", "causal_mask", f"{M}:MaskPlainArray", "buffers", "held as a plain attribute 'mask' (NDArray [8, 8])", blocked=('compiled', 'devices', 'export', 'serialization')),
    Mutant("mxnet", "causal_mask", f"{M}:MaskNotAttribute", "buffers", "not in the saved state", blocked=('serialization',)),
    Mutant("mxnet", "round_ste", f"{M}:ste_reused_instance", "values",
           "Each Function instance can only be called once", also=("devices", "batching", "abstract"), blocked=('aliasing', 'device_parity', 'gradients')),
    Mutant("mxnet", "round_ste", f"{M}:ste_forward_called_directly", "gradients", "no custom backward rule ran"),
    Mutant("mxnet", "round_ste", f"{M}:STEDoubled", "gradients", "2x the expected"),
    # one slot: the file without it is empty, which Gluon 1.9.1 cannot read at all, so the extra key tells
    Mutant("mxnet", "rmsnorm", f"{M}:LoadIgnoresKeys", "strict_loading",
           "a saved state with an extra entry 'unexpected_slot' loaded strictly without an error"),
    # every other check builds the layer with a first call on the first case ([16, 8]), where the gain comes out
    # right; only a deferred initialisation whose first call is another case's ([2, 3, 8]) shows the mistake
    Mutant("mxnet", "rmsnorm", f"{M}:GainUnitsFlattened", "construction",
           "'gain' is [24] float32 after a first call on [2, 3, 8], a plain build's (first call on [16, 8]) [8]"),
    Mutant("mxnet", "rmsnorm", f"{M}:GainUnitsFlattened", "construction",
           "infer each from the axis it stands for (the features: X.shape[-1])"),
    # hybridize() and an exported graph run it (the cached op runs dynamic-shape operators), so compiled and export
    # pass; no case holds a NaN, so every value is right
    Mutant("mxnet", "rmsnorm", f"{M}:DropsNaNRows", "abstract",
           "infer_shape gives no output shape from the inputs' shapes ([16, 8]): the first unknown one is "
           "boolean_mask0's, an operator whose output shape depends on the values"),
]
