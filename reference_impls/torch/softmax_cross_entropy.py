import torch


class SoftmaxCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels):
        log_p = torch.log_softmax(logits, dim=-1)  # shifted by the max: stable at 1e4
        ctx.save_for_backward(log_p, labels)
        return -(labels * log_p).sum(-1)

    @staticmethod
    def backward(ctx, g):
        log_p, labels = ctx.saved_tensors
        # p - y for one-hot rows; labels are data, not parameters: no gradient
        return g[..., None] * (log_p.exp() * labels.sum(-1, keepdim=True) - labels), None


IMPL = SoftmaxCrossEntropy
