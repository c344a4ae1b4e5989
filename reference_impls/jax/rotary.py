import jax.numpy as jnp
from flax import nnx


def rotate_half(x):
    # the halves pair up (Llama, GPT-NeoX): feature i with feature i + head_dim/2, not 2i with 2i + 1
    h = x.shape[-1] // 2
    return jnp.concatenate([-x[..., h:], x[..., :h]], axis=-1)


class Rotary(nnx.Module):
    """X: [batch, heads, seq, head_dim], positions 0..seq-1 on the second to last axis."""
    rotate_half = staticmethod(rotate_half)

    def __init__(self, head_dim, base=10000.0):
        self.head_dim = head_dim
        self.base = base

    def cos_sin(self, seq, dtype):
        # inv_freq and the angles in float32 at least, from the constructor's numbers: no floating state for a
        # cast to 16 bits to round (a position multiplies inv_freq's rounding)
        exponents = jnp.arange(0, self.head_dim, 2, dtype=dtype) / self.head_dim
        inv_freq = 1.0 / jnp.asarray(self.base, dtype) ** exponents
        angles = jnp.arange(seq, dtype=dtype)[:, None] * inv_freq[None, :]
        angles = jnp.concatenate([angles, angles], axis=-1)
        return jnp.cos(angles), jnp.sin(angles)

    def __call__(self, X):
        wide = jnp.float64 if X.dtype == jnp.float64 else jnp.float32
        cos, sin = self.cos_sin(X.shape[-2], wide)
        Xw = X.astype(wide)
        return (Xw * cos + self.rotate_half(Xw) * sin).astype(X.dtype)  # rounded once, to the input's dtype


IMPL = Rotary
