"""Correct PyTorch layers that compute at a fixed precision, as popular code bases write them.

Each must pass every check of the bundled contract it implements (tests/test_zoo.py).
"""
import torch
from torch import nn


class RMSNormUpcast(nn.Module):
    """Llama-style: the input is upcast to float32 whatever its dtype, normalized, cast back,
    then scaled (the transformers LlamaRMSNorm pattern: no factory keywords, no reset_parameters, so
    construction's meta part is n/a)."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, X):
        input_dtype = X.dtype
        h = X.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * h.to(input_dtype)


class RMSNormFloat32(nn.Module):
    """Everything, the gain included, in float32; the result in the input's dtype."""
    def __init__(self, d, eps=1e-6, device=None, dtype=None):
        super().__init__()
        self.gain = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.eps = eps
        self.reset_parameters()

    def reset_parameters(self):  # as torch.nn's layers: it can be built on meta, then materialised
        nn.init.ones_(self.gain)

    def forward(self, X):
        x = X.float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gain.float()
        return y.to(X.dtype)


class RMSNormAutocast(RMSNormFloat32):
    """Mixed-precision code keeps norms out of autocast: forward runs in an autocast region
    switched off and computes in float32 (the usual guard around normalization layers)."""
    def forward(self, X):
        device_type = X.device.type if X.device.type in ("cpu", "cuda") else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            x = X.float()
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.gain.float() * y).to(X.dtype)


class RMSNormReturnsFloat32(RMSNormFloat32):
    """Computes in float32 and returns float32 whatever the input: right for the contract's float32
    inputs; given float64 it still answers in float32, so no finite difference is meaningful."""
    def forward(self, X):
        x = X.float()
        return self.gain.float() * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class _UpcastRMSNormScaledGrad(torch.autograd.Function):
    """float32 RMSNorm over the last axis whose backward is off by a factor `scale`."""
    @staticmethod
    def forward(ctx, X, eps, scale):
        x = X.float()
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, r)
        ctx.scale = scale
        return (x * r).to(X.dtype)

    @staticmethod
    def backward(ctx, g):
        x, r = ctx.saved_tensors
        g = g.float()
        dx = g * r - x * r ** 3 * (g * x).sum(-1, keepdim=True) / x.shape[-1]
        return (ctx.scale * dx).to(g.dtype), None, None


def upcast_rmsnorm_grad_scaled(scale):
    """A gain-free float32 RMSNorm whose hand-written backward is scaled (1.0: correct)."""
    class Layer(nn.Module):
        def forward(self, X):
            return _UpcastRMSNormScaledGrad.apply(X, 1e-6, scale)
    return Layer()


class ScaledTanhFunc(torch.autograd.Function):
    """scaled_tanh as torch.func wants a custom Function: forward without ctx, setup_context saving the
    output, and a generated vmap rule, so torch.func.vmap (and grad of vmap, vmap of grad) can run it."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y) * 0.5
