import jax
import jax.numpy as jnp
from flax import nnx


class GroupNorm(nnx.Module):
    # channels first, as torch.nn.GroupNorm: X is [N, C, ...]
    def __init__(self, groups, channels, eps=1e-5):
        self.gain = nnx.Param(jnp.ones(channels))
        self.bias = nnx.Param(jnp.zeros(channels))
        self.groups = groups
        self.eps = eps

    def __call__(self, X):
        # the statistics in float32 at least: in 16 bits the variance loses its digits
        X32 = X.astype(jnp.float32) if X.dtype in (jnp.float16, jnp.bfloat16) else X
        # consecutive channels form a group: [N, G, C/G * positions]
        Xg = X32.reshape(X.shape[0], self.groups, -1)
        Xc = Xg - Xg.mean(-1, keepdims=True)
        var = (Xc ** 2).mean(-1, keepdims=True)  # two passes, the biased variance
        Y = (Xc * jax.lax.rsqrt(var + self.eps)).reshape(X.shape).astype(X.dtype)
        per_channel = (-1,) + (1,) * (X.ndim - 2)
        return self.gain[...].reshape(per_channel) * Y + self.bias[...].reshape(per_channel)


IMPL = GroupNorm
