"""Broken PyTorch layers, one per known mistake: each layer is a correct one of tests/mutants/base_torch.py (or
of tests/zoo/) with the method its mistake lives in overridden. Each is caught in tests/test_mutants.py."""
import torch
from torch import nn

from layer_conformance.reference_impls.torch.linear_vjp import Linear as _Linear
from layer_conformance.reference_impls.torch.round_ste import RoundSTE as _RoundSTE
from layer_conformance.reference_impls.torch.scaled_tanh import ScaledTanh as _ScaledTanh
from tests.mutants.base_torch import CausalMask, RMSNorm
from tests.mutants.catalogue import Mutant
from tests.zoo.torch_layers import ScaledTanhFunc


class GainPlainTensor(RMSNorm):
    """The gain as a plain tensor attribute: invisible to parameters(), .to() and state_dict."""
    def make_gain(self, d):
        self.gain = torch.ones(d)


class GainWrongShape(RMSNorm):
    """A gain of d + 1 entries (sliced to the width in the forward): no state of the contract's shape can be set
    into it, so every check that sets state meets the framework's size error; parameters names the shape."""
    def make_gain(self, d):
        self.gain = nn.Parameter(torch.ones(d + 1))

    def forward(self, X):
        return self.gain[: X.shape[-1]] * X * self.inverse_rms(X)


class GainInList(RMSNorm):
    """The gain inside a plain Python list: also invisible (pytorch#715)."""
    def make_gain(self, d):
        self.weights = [nn.Parameter(torch.ones(d))]

    def forward(self, X):
        return self.weights[0] * X * self.inverse_rms(X)


class EpsOutsideSqrt(RMSNorm):
    """x / (sqrt(mean x^2) + eps): right for large rows, wrong where mean square ~ eps."""
    def forward(self, X):
        return self.gain * X / (X.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)


class WrongAxis(RMSNorm):
    """Normalizes over the batch axis instead of the feature axis."""
    def inverse_rms(self, X):
        return X.pow(2).mean(0, keepdim=True).add(self.eps).rsqrt()


class MaskAsParameter(CausalMask):
    """The mask as a Parameter: an optimizer would be handed it."""
    def hold_mask(self, mask):
        self.mask = nn.Parameter(mask, requires_grad=False)


class MaskPlainAttribute(CausalMask):
    """The mask as a plain attribute: .to() skips it and state_dict omits it."""
    def hold_mask(self, mask):
        self.mask = mask


class MaskEveryCall(CausalMask):
    """The mask built afresh at every call: right values, but no state where the contract declares one."""
    def hold_mask(self, mask):
        pass

    def forward(self, scores):
        T = scores.shape[-1]
        return scores.masked_fill(self.masked(T).to(scores.device), float("-inf"))


class MaskBuffer(CausalMask):
    """Right (a near miss for the mask mutants): a persistent buffer."""


class GainAsBuffer(RMSNorm):
    """The gain registered as a buffer: saved and moved, but not a parameter, so never trained."""
    def make_gain(self, d):
        self.register_buffer("gain", torch.ones(d))


class MaskNotPersistent(CausalMask):
    """register_buffer(..., persistent=False): moves, but is missing from state_dict (pytorch#105233)."""
    def hold_mask(self, mask):
        self.register_buffer("mask", mask, persistent=False)


def ste_forward_called_directly(w):
    """Calls Function.forward instead of apply: no autograd node, so backward never runs."""
    return _RoundSTE.forward(None, w)


class STEDoubled(_RoundSTE):
    """A wrong surrogate: the gradient doubled."""
    @staticmethod
    def backward(ctx, g):
        return 2 * g


class STEZeroBackward(_RoundSTE):
    """Called through apply, so its backward runs, but the rule returns zeros: the rule is wrong, not bypassed."""
    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


class LoadIgnoresKeys(RMSNorm):
    """A load_state_dict override that forces strict=False ("so old checkpoints still load"): a
    checkpoint that lacks the gain leaves it at its initial ones without a word."""
    def load_state_dict(self, state_dict, strict=True, assign=False):
        return super().load_state_dict(state_dict, strict=False, assign=assign)


class BatchMeanSquare(RMSNorm):
    """RMSNorm with `.mean()` left without its axis: one mean square over the whole batch, a batch statistic
    that mixes every example into every other's output."""
    def inverse_rms(self, X):
        return X.pow(2).mean().add(self.eps).rsqrt()


class InferenceMemo(RMSNorm):
    """RMSNorm that memoizes its inverse RMS by input shape in a Python dict when no gradient is recorded (an
    'inference cache'): right in every first call, stale in a later one of the same shape; under torch.func.vmap
    (run without gradients) every example has the same shape, so a second vectorised call reuses the first's."""
    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        self._memo = {}

    def inverse_rms(self, X):
        if torch.is_grad_enabled():
            return super().inverse_rms(X)
        key = tuple(X.shape)
        if key not in self._memo:
            self._memo[key] = super().inverse_rms(X)
        return self._memo[key]


class BatchFromFirstCall(RMSNorm):
    """RMSNorm that remembers the batch size of its first call and takes a 'fast path' (the rows as one
    matrix) for batches of that size: right eagerly at every size, but a program traced with a symbolic batch
    is specialised to the remembered size (torch.export with Dim("batch") refuses it)."""
    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)
        self._batch = None

    def forward(self, X):
        if self._batch is None:
            self._batch = X.shape[0]
        if X.shape[0] == self._batch:
            return super().forward(X.reshape(-1, X.shape[-1])).reshape(X.shape)
        return super().forward(X)


class BatchAsPythonInt(RMSNorm):
    """RMSNorm that counts its rows with a tensor op and reads the count back with int() (a host sync) to
    reshape: right eagerly, but without data (a fake or meta tensor, a traced program) there is no count."""
    def forward(self, X):
        n = int(torch.count_nonzero(X.new_ones(X.shape[:-1])))
        return super().forward(X.reshape(n, X.shape[-1])).reshape(X.shape)


class ScaledTanhBatchMeanGrad(ScaledTanhFunc):
    """scaled_tanh written for torch.func (setup_context, generate_vmap_rule) whose backward averages the
    upstream gradient over the batch axis ("smoother"): every example's gradient takes in every other's.
    The forward is right; torch.func runs the backward per example, so grad of vmap and vmap of grad show it."""
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output.mean(0, keepdim=True) * (1 - y * y) * 0.5


# --- construction: the ways real code builds a layer -----------------------------------------------

class GainIgnoresDevice(RMSNorm):
    """Takes device= and dtype=, as torch.nn's layers do, but makes its gain with torch.ones(d) alone: the
    gain lands on the CPU in float32 whatever was asked (construction on meta then allocates it for real)."""
    def __init__(self, d, eps=1e-6, device=None, dtype=None):
        super().__init__(d, eps)

    def reset_parameters(self):
        nn.init.ones_(self.gain)


class GainNoResetParameters(RMSNorm):
    """Initialises its gain in __init__ only, with no reset_parameters: built on meta and materialised with
    to_empty, its gain is uninitialised memory that nothing fills."""
    def __init__(self, d, eps=1e-6, device=None, dtype=None):
        super().__init__(d, eps)
        self.gain = nn.Parameter(torch.ones(d, device=device, dtype=dtype))


class BiasNotReset(RMSNorm):
    """reset_parameters resets the gain but forgets the bias, which __init__ set: after construction on meta
    and to_empty, the bias stays uninitialised."""
    def __init__(self, d, eps=1e-6, bias=False, device=None, dtype=None):
        super().__init__(d, eps)
        self.gain = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(d, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.gain)

    def forward(self, X):
        Y = super().forward(X)
        return Y if self.bias is None else Y + self.bias


class ScaledTanhViewBackward(_ScaledTanh):
    """scaled_tanh whose backward flattens the incoming gradient with .view(-1) to apply the rule elementwise:
    right for a contiguous gradient; torch hands a non-contiguous one over as it is, and .view raises."""
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        flat = grad_output.view(-1)
        return (flat * (1 - y.reshape(-1) ** 2) * 0.5).reshape(grad_output.shape)


class RMSNormAsStrided(RMSNorm):
    """RMSNorm that reads its input through as_strided with the strides of a contiguous tensor (a 'zero-copy'
    row view): right for contiguous inputs, other elements for a transposed view or a slice with a step."""
    def forward(self, X):
        return super().forward(X.as_strided(X.shape, torch.empty(X.shape, device="meta").stride()))


class ScaledTanhInPlace(torch.autograd.Function):
    """scaled_tanh that 'saves memory' by computing tanh in the input's own buffer (x.tanh_()) and returning a
    copy: the output and the gradient are right, and the caller's input now holds tanh(x)."""
    @staticmethod
    def forward(ctx, x):
        x.tanh_()
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y) * 0.5


class ScaledTanhWrittenInPlace(torch.autograd.Function):
    """scaled_tanh written into its input on purpose, as a contract with aliasing: {in_place: true} declares:
    marked dirty, the output saved; correct (tests/test_aliasing_layout.py)."""
    @staticmethod
    def forward(ctx, x):
        x.tanh_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y) * 0.5


class ScaledTanhInPlaceReadsOverwritten(ScaledTanhWrittenInPlace):
    """scaled_tanh written in place whose backward takes the saved tensor for the input x, where the forward
    overwrote it with tanh(x): it computes tanh(tanh(x)), a wrong gradient (tests/test_aliasing_layout.py)."""
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        t = torch.tanh(x)
        return grad_output * (1 - t * t) * 0.5


class LinearGradsById(torch.autograd.Function):
    """linear_vjp whose forward remembers which argument position each input tensor holds, keyed by id(): one
    tensor passed as both x and b keeps one position (the last), so its gradient loses the W^T g term."""
    @staticmethod
    def forward(ctx, W, x, b):
        ctx.save_for_backward(W, x)
        ctx.position = {id(t): k for k, t in enumerate((W, x, b))}
        return W @ x + b

    @staticmethod
    def backward(ctx, g):
        W, x = ctx.saved_tensors
        every = (torch.outer(g, x), W.T @ g, g)
        grads = [None, None, None]
        for k in ctx.position.values():
            grads[k] = every[k]
        return tuple(grads)


class ScalesInputInPlace(RMSNorm):
    """h = x; h.mul_(1 / rms): right outputs, but the caller's tensor is scaled too, and autograd refuses the
    backward (the square it saved was overwritten), as compiled and reloaded calls do: one mistake, which aliasing
    names with the op; the other failures are its symptoms."""
    def forward(self, X):
        h = X
        h.mul_(torch.rsqrt(X.to(torch.promote_types(X.dtype, torch.float32)).pow(2).mean(-1, keepdim=True)
                           + self.eps).to(X.dtype))
        return h * self.gain


class Log1pExpOutputOverSaved(torch.autograd.Function):
    """Writes its output into the tensor it saved for backward (sigmoid's input): the backward then reads the
    output (a saved output passes autograd's version check), so the gradient is wrong: one mistake, gradients."""
    @staticmethod
    def forward(ctx, x):
        t = x.clone()
        ctx.save_for_backward(t)
        return t.copy_(torch.logaddexp(x, torch.zeros_like(x)))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


class LinearGradXUnderWsFlag(_Linear):
    """grad_x computed only when W needs a gradient (the slip of apex#1517): right while every input requires
    one; with W frozen, x gets None."""
    @staticmethod
    def backward(ctx, g):
        W, x = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            return torch.outer(g, x), W.T @ g, g
        return None, None, g


M = "tests.mutants.torch_mutants"
MUTANTS = [
    Mutant("torch", "rmsnorm", f"{M}:GainPlainTensor", "parameters", "untracked attribute 'gain'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization', 'abstract')),
    Mutant("torch", "rmsnorm", f"{M}:GainWrongShape", "parameters", "'gain' has shape [9], expected [8]", blocked=('abstract', 'aliasing', 'batching', 'compiled', 'devices', 'export', 'gradients', 'layout', 'native', 'serialization', 'strict_loading', 'values')),
    Mutant("torch", "rmsnorm", f"{M}:GainInList", "parameters", "untracked attribute 'weights[0]'", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization', 'abstract')),
    Mutant("torch", "rmsnorm", f"{M}:EpsOutsideSqrt", "values", "case 'edge_rows'", blocked=('gradients', 'native', 'properties')),
    Mutant("torch", "rmsnorm", f"{M}:WrongAxis", "batching", "was perturbed", blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("torch", "rmsnorm", f"{M}:BatchMeanSquare", "batching", "changed when example 0 was perturbed", blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("torch", "rmsnorm", f"{M}:InferenceMemo", "batching", "keeps Python state between calls", also=('abstract',)),
    Mutant("torch", "rmsnorm", f"{M}:BatchFromFirstCall", "abstract", "remembered from the first call"),
    Mutant("torch", "rmsnorm", f"{M}:BatchAsPythonInt", "abstract", "reads a tensor's value in Python",
           also=('batching', 'compiled', 'devices', 'export')),
    Mutant("torch", "scaled_tanh", f"{M}:ScaledTanhBatchMeanGrad", "batching", "the custom gradient rule mixes examples",
           also=('gradients',)),
    Mutant("torch", "causal_mask", f"{M}:MaskAsParameter", "buffers", "is registered as trainable", blocked=('parameters',)),
    Mutant("torch", "causal_mask", f"{M}:MaskPlainAttribute", "buffers", "held as a plain attribute 'mask'", blocked=('compiled', 'devices', 'export', 'serialization', 'abstract')),
    Mutant("torch", "causal_mask", f"{M}:MaskNotPersistent", "buffers", "not in the saved state", blocked=('serialization',)),
    Mutant("torch", "causal_mask", f"{M}:MaskEveryCall", "buffers", "non-trainable slot 'mask' is missing from the "
           "layer's state", blocked=('compiled', 'export', 'serialization')),
    Mutant("torch", "rmsnorm", f"{M}:GainAsBuffer", "parameters", "registered as non-trainable state ('gain'): "
           "gradients skip it and no optimizer updates it; it is a buffer", blocked=("gradients",)),
    Mutant("torch", "round_ste", f"{M}:ste_forward_called_directly", "gradients", "no custom backward rule ran"),
    Mutant("torch", "round_ste", f"{M}:STEDoubled", "gradients", "2x the expected"),
    Mutant("torch", "rmsnorm", f"{M}:LoadIgnoresKeys", "strict_loading",
           "a saved state without slot 'gain' loaded strictly without an error: the layer's load ignores missing keys"),
    Mutant("torch", "round_ste", f"{M}:STEZeroBackward", "gradients", "the layer's custom backward rule did run"),
    Mutant("torch", "rmsnorm", f"{M}:GainIgnoresDevice", "construction",
           "constructed with device='meta', 1 of 1 parameter(s) and buffer(s) are not placed there: 'gain' (on cpu)"),
    Mutant("torch", "rmsnorm_bias", f"{M}:BiasNotReset", "construction",
           "'bias' is left uninitialised (still NaN) by reset_parameters"),
    Mutant("torch", "scaled_tanh", f"{M}:ScaledTanhViewBackward", "layout", "calls .view() on a tensor that is not "
           "contiguous"),
    Mutant("torch", "rmsnorm", f"{M}:RMSNormAsStrided", "layout", "reads memory in storage order"),
    Mutant("torch", "scaled_tanh", f"{M}:ScaledTanhInPlace", "aliasing", "the call changed its input 'x'"),
    Mutant("torch", "linear_vjp", f"{M}:LinearGradsById", "aliasing", "keys its gradients by the tensors' identity",
           also=("compiled",)),
    Mutant("torch", "rmsnorm", f"{M}:ScalesInputInPlace", "aliasing",
           "the call changed its input 'X' (Tensor.mul_ writes into 'X')",
           blocked=("gradients", "layout", "compiled", "export")),
    Mutant("torch", "log1pexp", f"{M}:Log1pExpOutputOverSaved", "gradients", "gradient for 'x' in the worked example",
           blocked=("second_order",)),
    Mutant("torch", "linear_vjp", f"{M}:LinearGradXUnderWsFlag", "gradients",
           "no gradient reached input 'x' (case 'square') with only 'x' requiring a gradient: the layer's custom "
           "backward rule ran and returned None for it"),
]
