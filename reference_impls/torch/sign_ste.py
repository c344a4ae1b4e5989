import torch


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        # Pass the upstream gradient directly, as if forward were the identity
        return grad_output


IMPL = SignSTE
