import torch


def _safe(n):
    return torch.where(n == 0, torch.ones_like(n), n)


class SafeNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        n = torch.sqrt(torch.sum(x * x))
        ctx.save_for_backward(x, n)  # for backward (reverse mode)
        ctx.save_for_forward(x, n)   # for jvp (forward mode)
        return n

    @staticmethod
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        return g * x / _safe(n)

    @staticmethod
    def jvp(ctx, t):
        x, n = ctx.saved_tensors
        # the rule the seed defines: linear in t, 0 (not NaN) at x = 0
        return torch.sum(x * t) / _safe(n)


IMPL = SafeNorm
