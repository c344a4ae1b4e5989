"""Broken Flax NNX causal self-attention (the causal_attention contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
import math

import jax
import jax.numpy as jnp
from flax import nnx

from layer_conformance.reference_impls.jax.causal_attention import CausalAttention as _CausalAttention
from tests.mutants.catalogue import Mutant

M = "tests.mutants.jax_causal_attention"


class AttentionMaskAfterSoftmax(_CausalAttention):
    """The mask applied to the softmax weights (zeroing the future) instead of added to the scores before it:
    the past's weights no longer sum to one."""
    def attend(self, q, k, v):
        T = q.shape[-2]
        p = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), axis=-1)
        return (p * ~self.mask[:T, :T]) @ v


class AttentionHeadsStrided(_CausalAttention):
    """The heads split by a reshape to [..., head_dim, heads]: head h gets features h, h + heads, ... instead of
    h*head_dim ..; the merge is the contract's, so the features come back in the wrong places."""
    def split(self, t):
        return jnp.moveaxis(t.reshape(*t.shape[:-1], -1, self.heads), -1, -3)


class AttentionMaskAsParam(_CausalAttention):
    """The mask as an nnx.Param: nnx.Optimizer(wrt=nnx.Param) would be handed it."""
    def __init__(self, d, heads, max_len, rngs: nnx.Rngs):
        super().__init__(d, heads, max_len, rngs)
        self.mask = nnx.Param(self.mask[...])


MUTANTS = [
    Mutant("jax", "causal_attention", f"{M}:AttentionMaskAfterSoftmax", "values",
           "case 'random': mismatched elements", blocked=("gradients", "native")),
    Mutant("jax", "causal_attention", f"{M}:AttentionHeadsStrided", "values", "case 'random': mismatched elements",
           blocked=("gradients", "native")),
    Mutant("jax", "causal_attention", f"{M}:AttentionMaskAsParam", "buffers", "is registered as trainable",
           blocked=("device_parity", "export", "parameters")),
]
