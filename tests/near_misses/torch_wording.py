"""torch layers for tests/test_hints.py whose hints must speak of their own mistake (an overflow, not a statistic)."""
import torch


class Log1pExpNaive(torch.autograd.Function):
    """log(1 + exp(x)) written as it reads, with the stable backward: exp(x) overflows float16 beyond x = 11, so the
    output is inf where the result (about x) is not; right in float32."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log1p(torch.exp(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
