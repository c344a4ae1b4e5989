from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import autograd, nd  # noqa: E402


class SoftmaxCrossEntropy(autograd.Function):
    """Per-example loss from logits and one-hot labels. Single-use: a fresh one per call."""

    def forward(self, logits, labels):
        log_p = nd.log_softmax(logits, axis=-1)  # shifted by the max: stable at 1e4
        self.save_for_backward(log_p, labels)
        return -(labels * log_p).sum(axis=-1)

    def backward(self, g):
        log_p, labels = self.saved_tensors
        # p - y for one-hot rows. backward must return an array for every input: the labels
        # are data, not parameters, so theirs is zero
        grad_logits = g.expand_dims(-1) * (nd.exp(log_p) * labels.sum(axis=-1, keepdims=True) - labels)
        return grad_logits, nd.zeros_like(labels)


IMPL = SoftmaxCrossEntropy
