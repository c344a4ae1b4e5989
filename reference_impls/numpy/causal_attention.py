"""Causal multi-head self-attention: q, k, v = X wq, X wk, X wv (weights [in, out]), split into `heads` heads of
head_dim = d / heads consecutive features, softmax(q k^T / sqrt(head_dim) + M) v per head with the additive causal
mask M (0 on and below the diagonal, -inf above), the heads concatenated back in order, then times wo."""
import math

import numpy as np


def init_mask(max_len, **_):
    return np.triu(np.ones((max_len, max_len), dtype=bool), 1)


def _split(t, heads):
    """[..., T, d] -> [..., heads, T, head_dim]: head h holds features h*head_dim ... (h+1)*head_dim - 1."""
    *batch, T, d = t.shape
    return np.swapaxes(t.reshape(*batch, T, heads, d // heads), -3, -2)


def _merge(t):
    """[..., heads, T, head_dim] -> [..., T, d], the inverse of _split."""
    t = np.swapaxes(t, -3, -2)
    return t.reshape(*t.shape[:-2], -1)


def _attention(X, wq, wk, wv, mask, heads):
    """The per-head queries, keys, values, softmax weights and the concatenated heads."""
    T = X.shape[-2]
    q, k, v = (_split(X @ w, heads) for w in (wq, wk, wv))
    additive = np.where(mask[:T, :T], -np.inf, 0.0).astype(X.dtype)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + additive
    e = np.exp(s - s.max(-1, keepdims=True))   # the diagonal is never masked: every row's max is finite
    p = e / e.sum(-1, keepdims=True)
    return q, k, v, p, _merge(p @ v)


def forward(X, *, wq, wk, wv, wo, mask, heads, **_):
    return _attention(X, wq, wk, wv, mask, heads)[-1] @ wo


def _flat(t):
    return t.reshape(-1, t.shape[-1])


def vjp(g, X, *, wq, wk, wv, wo, mask, heads, **_):
    q, k, v, p, o = _attention(X, wq, wk, wv, mask, heads)
    do = _split(g @ wo.T, heads)
    dp = do @ np.swapaxes(v, -1, -2)
    dv = np.swapaxes(p, -1, -2) @ do
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / math.sqrt(q.shape[-1])  # masked entries: p = 0, ds = 0
    dq, dk = ds @ k, np.swapaxes(ds, -1, -2) @ q
    dq, dk, dv = _merge(dq), _merge(dk), _merge(dv)
    return {"X": dq @ wq.T + dk @ wk.T + dv @ wv.T,
            "wq": _flat(X).T @ _flat(dq), "wk": _flat(X).T @ _flat(dk), "wv": _flat(X).T @ _flat(dv),
            "wo": _flat(o).T @ _flat(g)}
