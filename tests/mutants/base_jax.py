"""The correct Flax NNX modules the JAX mutants (tests/mutants/jax_*.py) derive from, one per contract (or the
bundled reference, where its hooks serve), cut into the hooks a mistake lives in: a mutant overrides the one it
gets wrong and states nothing else. Not a catalogue module (no MUTANTS): its name does not start with the
framework's.

The RMSNorm computes its statistic in the input's own dtype, as the mutants always did: each mutant's numbers
are those it had before it derived from here.
"""
import jax.numpy as jnp
from flax import nnx


class RMSNorm(nnx.Module):
    """gain * X / sqrt(mean(X^2) + eps) over the last axis, the gain an nnx.Param of ones."""
    def __init__(self, d, eps=1e-6):
        self.make_gain(d)
        self.eps = eps

    def make_gain(self, d):
        self.gain = nnx.Param(jnp.ones(d))

    def __call__(self, X):
        return self.gain[...] * X / self.rms(X)

    def rms(self, X):
        """sqrt(mean(X^2) + eps) over the last axis, one per row."""
        return jnp.sqrt((X ** 2).mean(-1, keepdims=True) + self.eps)


class Buffer(nnx.Variable):
    """Non-trainable state: saved and moved with the module, skipped by nnx.Param filters."""


class CausalMask(nnx.Module):
    """The mask precomputed once for the longest sequence, held as a Buffer, sliced per call."""
    def __init__(self, max_len):
        self.mask = self.held(self.masked(max_len))

    def masked(self, n):
        """Where a query (row) may not see a key (column): the keys after it."""
        return jnp.triu(jnp.ones((n, n), dtype=bool), 1)

    def held(self, mask):
        """What the module keeps the mask in."""
        return Buffer(mask)

    def __call__(self, scores):
        T = scores.shape[-1]
        return jnp.where(self.mask[:T, :T], -jnp.inf, scores)
