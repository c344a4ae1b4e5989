"""Broken Gluon rotary position embeddings (the rotary contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
from layer_conformance.reference_impls.mxnet.rotary import Rotary as _Rotary
from mxnet import nd

from tests.mutants.catalogue import Mutant

M = "tests.mutants.mxnet_rotary"


class RotaryFromOne(_Rotary):
    """Positions 1..seq instead of 0..seq-1 (off by one): the first position is rotated, not left alone."""
    def cos_sin(self, seq, ctx, dtype):
        cos, sin = super().cos_sin(seq + 1, ctx, dtype)
        return cos[1:], sin[1:]


def _pairs_interleaved(x):
    # (-x1, x0, -x3, x2, ...): feature 2i paired with 2i + 1
    pairs = x.reshape(x.shape[:-1] + (-1, 2))
    odd, even = nd.slice_axis(pairs, axis=-1, begin=1, end=2), nd.slice_axis(pairs, axis=-1, begin=0, end=1)
    return nd.concat(-odd, even, dim=-1).reshape(x.shape)


class RotaryInterleaved(_Rotary):
    """The paper's interleaved pairs (2i, 2i + 1), each at its own angle, where the contract pairs i with
    i + head_dim/2 (rotate_half)."""
    rotate_half = staticmethod(_pairs_interleaved)

    def cos_sin(self, seq, ctx, dtype):
        cos, sin = super().cos_sin(seq, ctx, dtype)
        h = self.head_dim // 2
        return nd.repeat(cos[:, :h], repeats=2, axis=-1), nd.repeat(sin[:, :h], repeats=2, axis=-1)


class RotateHalfSwapped(_Rotary):
    """rotate_half as concat(x2, -x1), the minus on the wrong half: every pair turns by -angle."""
    rotate_half = staticmethod(lambda x: -_Rotary.rotate_half(x))


MUTANTS = [
    Mutant("mxnet", "rotary", f"{M}:RotaryFromOne", "values", "case 'single_position': mismatched elements",
           blocked=("gradients",)),
    Mutant("mxnet", "rotary", f"{M}:RotaryInterleaved", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("mxnet", "rotary", f"{M}:RotateHalfSwapped", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
]
