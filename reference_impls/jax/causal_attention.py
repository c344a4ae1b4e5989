import math

import jax
import jax.numpy as jnp
from flax import nnx


class Buffer(nnx.Variable):
    """Non-trainable state: saved and moved with the module, skipped by nnx.Param filters."""


class CausalAttention(nnx.Module):
    def __init__(self, d, heads, max_len, rngs: nnx.Rngs):
        # the weights held [in, out], as the contract lays them out: q = X @ wq; nnx.Linear's start (LeCun
        # normal), drawn from the params stream of the Rngs given
        def weight():
            return nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (d, d)))
        self.wq, self.wk, self.wv, self.wo = weight(), weight(), weight(), weight()
        # the causal mask precomputed once for the longest sequence, sliced per call: non-trainable state
        self.mask = Buffer(jnp.triu(jnp.ones((max_len, max_len), dtype=bool), 1))
        self.heads = heads

    def split(self, t):
        """[..., T, d] -> [..., heads, T, head_dim]: head h holds features h*head_dim .. (h+1)*head_dim - 1."""
        return jnp.swapaxes(t.reshape(*t.shape[:-1], self.heads, -1), -3, -2)

    def merge(self, t):
        """[..., heads, T, head_dim] -> [..., T, d]: the heads concatenated back in order."""
        t = jnp.swapaxes(t, -3, -2)
        return t.reshape(*t.shape[:-2], -1)

    def scores(self, q, k):
        T = q.shape[-2]
        additive = jnp.where(self.mask[:T, :T], -jnp.inf, 0.0).astype(q.dtype)
        return q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + additive

    def attend(self, q, k, v):
        return jax.nn.softmax(self.scores(q, k), axis=-1) @ v

    def __call__(self, X):
        # in float32 at least: a 16-bit score ~30 is off by a tenth, which softmax makes a 10% error in the weights
        work = jnp.float32 if X.dtype in (jnp.float16, jnp.bfloat16) else X.dtype
        Xw = X.astype(work)
        q, k, v = (self.split(Xw @ w[...].astype(work)) for w in (self.wq, self.wk, self.wv))
        return (self.merge(self.attend(q, k, v)) @ self.wo[...].astype(work)).astype(X.dtype)


IMPL = CausalAttention
