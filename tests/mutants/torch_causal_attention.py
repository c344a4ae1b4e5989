"""Broken PyTorch causal self-attention (the causal_attention contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them. (A module of their own: tests/mutants/torch_contracts.py is near 600 lines.)"""
import math

import torch
from torch import nn

from layer_conformance.reference_impls.torch.causal_attention import CausalAttention as _CausalAttention
from tests.mutants.catalogue import Mutant

M = "tests.mutants.torch_causal_attention"


class AttentionNoMask(_CausalAttention):
    """No causal mask: every query sees the whole sequence, the future included."""
    def scores(self, q, k):
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


class AttentionMaskAfterSoftmax(_CausalAttention):
    """The mask applied to the softmax weights (zeroing the future) instead of added to the scores before it:
    the past's weights no longer sum to one."""
    def attend(self, q, k, v):
        T = q.shape[-2]
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return (p * ~self.mask[:T, :T]) @ v


class AttentionScaledByD(_CausalAttention):
    """Scores scaled by 1/d (the model width) instead of 1/sqrt(head_dim)."""
    def scores(self, q, k):
        d = q.shape[-1] * self.heads
        return super().scores(q, k) * math.sqrt(q.shape[-1]) / d


class AttentionHeadsStrided(_CausalAttention):
    """The heads split by a reshape to [..., head_dim, heads]: head h gets features h, h + heads, ... instead of
    h*head_dim ..; the merge is the contract's, so the features come back in the wrong places."""
    def split(self, t):
        return t.unflatten(-1, (-1, self.heads)).movedim(-1, -3)


class AttentionSoftmaxOverQueries(_CausalAttention):
    """Softmax over the queries (axis -2) instead of the keys."""
    def attend(self, q, k, v):
        return torch.softmax(self.scores(q, k), dim=-2) @ v


class AttentionMaskAsParameter(_CausalAttention):
    """The mask as a Parameter (requires_grad=False): state_dict keeps it, but an optimizer built from
    parameters() is handed it."""
    def __init__(self, d, heads, max_len, device=None, dtype=None):
        super().__init__(d, heads, max_len, device=device, dtype=dtype)
        mask = self.mask
        del self.mask
        self.mask = nn.Parameter(mask, requires_grad=False)


class AttentionMaskNotPersistent(_CausalAttention):
    """The mask registered with persistent=False: it moves with .to(), but state_dict omits it."""
    def __init__(self, d, heads, max_len, device=None, dtype=None):
        super().__init__(d, heads, max_len, device=device, dtype=dtype)
        mask = self.mask
        del self.mask
        self.register_buffer("mask", mask, persistent=False)


class AttentionMaskPlainAttribute(_CausalAttention):
    """The mask as a plain tensor attribute: .to() skips it and state_dict omits it."""
    def __init__(self, d, heads, max_len, device=None, dtype=None):
        super().__init__(d, heads, max_len, device=device, dtype=dtype)
        mask = self.mask
        del self.mask
        self.mask = mask


MUTANTS = [
    Mutant("torch", "causal_attention", f"{M}:AttentionNoMask", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionMaskAfterSoftmax", "values",
           "case 'random': mismatched elements", blocked=("gradients",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionScaledByD", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionHeadsStrided", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionSoftmaxOverQueries", "values",
           "case 'random': mismatched elements", blocked=("gradients",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionMaskAsParameter", "buffers", "is registered as trainable",
           blocked=("parameters",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionMaskNotPersistent", "buffers", "not in the saved state",
           blocked=("serialization",)),
    Mutant("torch", "causal_attention", f"{M}:AttentionMaskPlainAttribute", "buffers",
           "held as a plain attribute 'mask'", blocked=("abstract", "compiled", "composition", "devices", "export",
                                                     "serialization")),
]
