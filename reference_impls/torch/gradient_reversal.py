import torch


class GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.save_for_backward(lam)
        # a new tensor, not x itself: an output that is an input would share its version counter
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (lam,) = ctx.saved_tensors
        # reversed and scaled; lam is a setting, not data: no cotangent
        return -lam.to(grad_output.dtype) * grad_output, None


IMPL = GradientReversal
