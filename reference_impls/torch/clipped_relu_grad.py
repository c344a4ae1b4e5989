import torch


class ClippedReLUGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp_min(x, 0.0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        # ReLU gradient, then clipped to [-1, 1]
        return torch.clamp(grad_output * (x > 0).to(grad_output.dtype), -1.0, 1.0)


IMPL = ClippedReLUGrad
