"""Per-example softmax cross-entropy from logits and one-hot labels (003).

loss[n] = logsumexp(z[n]) - sum_k y[n, k] z[n, k]; gradient g[n] (p[n] - y[n]) w.r.t. the logits
(for one-hot y) and none w.r.t. the labels.
"""
import numpy as np


def _log_softmax(z):
    m = z.max(-1, keepdims=True)  # shift by the max: exp never overflows
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def forward(logits, labels, **_):
    return -(labels * _log_softmax(logits)).sum(-1)


def vjp(g, logits, labels, **_):
    p = np.exp(_log_softmax(logits))
    # general labels: d/dz = p * sum(y) - y, which is p - y for one-hot rows
    return {"logits": g[..., None] * (p * labels.sum(-1, keepdims=True) - labels)}


def hvp(g, v, logits, labels, **_):
    # d/dz <g (p sum(y) - y), v> = g sum(y) (p v - p (p . v)): the softmax Jacobian diag(p) - p p^T
    p = np.exp(_log_softmax(logits))
    t = v["logits"]
    return {"logits": g[..., None] * labels.sum(-1, keepdims=True) * (p * t - p * (p * t).sum(-1, keepdims=True))}
