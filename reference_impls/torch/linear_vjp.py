import torch


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, W, x, b):
        ctx.save_for_backward(W, x)  # the residuals the VJP needs
        return W @ x + b

    @staticmethod
    def backward(ctx, g):
        W, x = ctx.saved_tensors
        # never the Jacobian: an outer product and a transposed product
        return torch.outer(g, x), W.T @ g, g


IMPL = Linear
