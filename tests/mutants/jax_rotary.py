"""Broken Flax NNX rotary position embeddings (the rotary contract), each the bundled layer with one mistake;
tests/test_mutants.py runs them."""
import jax.numpy as jnp
from flax import nnx

from layer_conformance.reference_impls.jax.rotary import Rotary as _Rotary
from tests.mutants.catalogue import Mutant

M = "tests.mutants.jax_rotary"


class RotateHalfSwapped(_Rotary):
    """rotate_half as concat(x2, -x1), the minus on the wrong half: every pair turns by -angle."""
    rotate_half = staticmethod(lambda x: jnp.concatenate([x[..., x.shape[-1] // 2:], -x[..., :x.shape[-1] // 2]], -1))


class RotaryBase1000(_Rotary):
    """inv_freq from a hard-coded base of 1000, whatever base it is given (the contract's is 10000)."""
    def __init__(self, head_dim, base=10000.0):
        super().__init__(head_dim, base=1000.0)


class RotaryTrainableInvFreq(_Rotary):
    """inv_freq held as an nnx.Param: an optimizer would train the frequencies."""
    def __init__(self, head_dim, base=10000.0):
        super().__init__(head_dim, base)
        self.inv_freq = nnx.Param(1.0 / base ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))

    def cos_sin(self, seq, dtype):
        angles = jnp.arange(seq, dtype=dtype)[:, None] * self.inv_freq[...].astype(dtype)[None, :]
        angles = jnp.concatenate([angles, angles], axis=-1)
        return jnp.cos(angles), jnp.sin(angles)


MUTANTS = [
    Mutant("jax", "rotary", f"{M}:RotateHalfSwapped", "values", "case 'random': mismatched elements",
           blocked=("gradients",)),
    Mutant("jax", "rotary", f"{M}:RotaryBase1000", "values", "case 'long_sequence': mismatched elements",
           blocked=("gradients",)),
    Mutant("jax", "rotary", f"{M}:RotaryTrainableInvFreq", "parameters", "unexpected trainable state"),
]
