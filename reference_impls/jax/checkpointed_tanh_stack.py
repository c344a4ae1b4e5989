import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


@jax.checkpoint
def _step(h, w, b):
    # a pure function of its arguments: the backward pass recomputes tanh from exactly these
    return jnp.tanh(h @ w + b)


class CheckpointedTanhStack(nnx.Module):
    def __init__(self, d, depth=4):
        # linspace in float64, then rounded: the contract's init, bit for bit
        self.w = nnx.Param(jnp.asarray(np.linspace(-0.5, 0.5, d * d).reshape(d, d), dtype=jnp.float32))
        self.b = nnx.Param(jnp.zeros(d))
        self.depth = depth

    def __call__(self, h):
        for _ in range(self.depth):
            # weights go in as arguments (never closed over), so they are differentiated
            h = _step(h, self.w[...], self.b[...])
        return h


IMPL = CheckpointedTanhStack
