import torch


class Log1pExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.logaddexp(x, torch.zeros_like(x))  # log(1 + exp(x)), finite for large x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # exp(x) / (1 + exp(x)) overflows to inf / inf; sigmoid is stable
        return grad_output * torch.sigmoid(x)


IMPL = Log1pExp
