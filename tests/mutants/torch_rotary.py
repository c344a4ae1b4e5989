"""Broken PyTorch rotary position embeddings (the rotary contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them. (A module of their own: tests/mutants/torch_contracts.py is near 600 lines.)"""
import torch
from torch import nn

from layer_conformance.reference_impls.torch.rotary import Rotary as _Rotary
from tests.mutants.catalogue import Mutant

M = "tests.mutants.torch_rotary"


class RotaryFromOne(_Rotary):
    """Positions 1..seq instead of 0..seq-1 (off by one): the first position is rotated, not left alone."""
    def cos_sin(self, seq, device, dtype):
        cos, sin = super().cos_sin(seq + 1, device, dtype)
        return cos[1:], sin[1:]


def _pairs_interleaved(x):
    # (-x1, x0, -x3, x2, ...): feature 2i paired with 2i + 1
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


class RotaryInterleaved(_Rotary):
    """The paper's interleaved pairs (2i, 2i + 1), each at its own angle, where the contract pairs i with
    i + head_dim/2 (rotate_half): a checkpoint trained one way is rotated wrongly by the other."""
    rotate_half = staticmethod(_pairs_interleaved)

    def cos_sin(self, seq, device, dtype):
        cos, sin = super().cos_sin(seq, device, dtype)
        h = self.head_dim // 2
        return cos[:, :h].repeat_interleave(2, -1), sin[:, :h].repeat_interleave(2, -1)


class RotaryBase1000(_Rotary):
    """inv_freq from a hard-coded base of 1000, whatever base it is given (the contract's is 10000)."""
    def __init__(self, head_dim, base=10000.0):
        super().__init__(head_dim, base=1000.0)


class RotateHalfSwapped(_Rotary):
    """rotate_half as concat(x2, -x1), the minus on the wrong half: every pair turns by -angle."""
    rotate_half = staticmethod(lambda x: torch.cat((x[..., x.shape[-1] // 2:], -x[..., :x.shape[-1] // 2]), -1))


class RotaryTrainableInvFreq(_Rotary):
    """inv_freq held as an nn.Parameter: an optimizer would train the frequencies, and a 16-bit cast rounds it."""
    def __init__(self, head_dim, base=10000.0):
        super().__init__(head_dim, base)
        self.inv_freq = nn.Parameter(1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))

    def cos_sin(self, seq, device, dtype):
        angles = torch.arange(seq, device=device, dtype=dtype)[:, None] * self.inv_freq.to(dtype)[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos(), angles.sin()


class RotaryFloatBuffer(RotaryTrainableInvFreq):
    """inv_freq in a floating buffer (upcast to float32 when used, as transformers' LlamaRotaryEmbedding does):
    the layer cast to float16 rounds it there (2^-11 relatively), and position 63 multiplies that rounding."""
    def __init__(self, head_dim, base=10000.0):
        _Rotary.__init__(self, head_dim, base)
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))


class RotaryAnglesInInputDtype(_Rotary):
    """Positions and angles in the input's dtype: in bfloat16, 63 * inv_freq keeps 8 bits (0.06 rad off)."""
    def forward(self, X):
        cos, sin = self.cos_sin(X.shape[-2], X.device, X.dtype)
        return X * cos + self.rotate_half(X) * sin


MUTANTS = [
    Mutant("torch", "rotary", f"{M}:RotaryFromOne", "values", "case 'single_position': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "rotary", f"{M}:RotaryInterleaved", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "rotary", f"{M}:RotaryBase1000", "values", "case 'long_sequence': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "rotary", f"{M}:RotateHalfSwapped", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("torch", "rotary", f"{M}:RotaryTrainableInvFreq", "parameters", "unexpected trainable state 'inv_freq'"),
    Mutant("torch", "rotary", f"{M}:RotaryFloatBuffer", "values", "case 'long_sequence': mismatched elements",
           dtype="float16"),
    Mutant("torch", "rotary", f"{M}:RotaryAnglesInInputDtype", "values", "case 'long_sequence': mismatched elements",
           dtype="bfloat16"),
]
