"""Broken Gluon causal self-attention (the causal_attention contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
import math

from layer_conformance.reference_impls.mxnet.causal_attention import CausalAttention as _CausalAttention
from layer_conformance.reference_impls.mxnet.causal_attention import nd
from tests.mutants.catalogue import Mutant

M = "tests.mutants.mxnet_causal_attention"


class AttentionNoMask(_CausalAttention):
    """No causal mask: every query sees the whole sequence, the future included."""
    def scores(self, q, k):
        return nd.linalg.gemm2(q, k, transpose_b=True, alpha=1.0 / math.sqrt(q.shape[-1]))


class AttentionScaledByD(_CausalAttention):
    """Scores scaled by 1/d (the model width) instead of 1/sqrt(head_dim)."""
    def scores(self, q, k):
        d = q.shape[-1] * self.heads
        return super().scores(q, k) * (math.sqrt(q.shape[-1]) / d)


MUTANTS = [
    Mutant("mxnet", "causal_attention", f"{M}:AttentionNoMask", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("mxnet", "causal_attention", f"{M}:AttentionScaledByD", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
]
