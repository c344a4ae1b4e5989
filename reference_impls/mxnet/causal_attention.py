import math

import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import init, nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class CausalAttention(nn.Block):
    def __init__(self, d, heads, max_len, **kwargs):
        super().__init__(**kwargs)
        # On 1.9.1 a parameter registers through the block's ParameterDict, not by assignment; held [in, out], as
        # the contract lays them out (q = X @ wq), a Xavier uniform (std sqrt(1/d)) from mx.random's seeded
        # generator. The causal mask, precomputed once for the longest sequence and sliced per call, is a
        # Constant (grad_req 'null'): saved and moved with the block, never updated by a Trainer
        with self.name_scope():
            self.wq, self.wk, self.wv, self.wo = (self.params.get(n, shape=(d, d), init=init.Xavier())
                                                  for n in ("wq", "wk", "wv", "wo"))
            self.mask = self.params.get_constant('mask', nd.array(np.triu(np.ones((max_len, max_len)), 1),
                                                                  dtype='bool'))
        self.heads = heads

    def split(self, t):
        """[..., T, d] -> [..., heads, T, head_dim]: head h holds features h*head_dim .. (h+1)*head_dim - 1."""
        t = t.reshape(t.shape[:-1] + (self.heads, -1))
        return nd.swapaxes(t, t.ndim - 3, t.ndim - 2)

    def merge(self, t):
        """[..., heads, T, head_dim] -> [..., T, d]: the heads concatenated back in order."""
        t = nd.swapaxes(t, t.ndim - 3, t.ndim - 2)
        return t.reshape(t.shape[:-2] + (-1,))

    def scores(self, q, k):
        T = q.shape[-2]
        # legacy operators take no bool operands: the additive mask from a mask of the scores' dtype
        above = self.mask.data(q.context)[:T, :T].astype(q.dtype)
        additive = nd.where(above, nd.full((T, T), -np.inf, ctx=q.context, dtype=q.dtype), nd.zeros_like(above))
        s = nd.linalg.gemm2(q, k, transpose_b=True, alpha=1.0 / math.sqrt(q.shape[-1]))
        return nd.broadcast_add(s, additive.reshape((1,) * (s.ndim - 2) + (T, T)))

    def attend(self, q, k, v):
        return nd.linalg.gemm2(nd.softmax(self.scores(q, k), axis=-1), v)

    def forward(self, X):
        # in float32 at least: a 16-bit score ~30 is off by a tenth, which softmax makes a 10% error in the weights
        work = "float32" if X.dtype == np.float16 else X.dtype
        ctx, Xw = X.context, X.astype(work)
        q, k, v = (self.split(nd.dot(Xw, w.data(ctx).astype(work))) for w in (self.wq, self.wk, self.wv))
        return nd.dot(self.merge(self.attend(q, k, v)), self.wo.data(ctx).astype(work)).astype(X.dtype)


IMPL = CausalAttention
