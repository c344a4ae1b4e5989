"""Broken JAX / Flax NNX layers, one per known mistake. Each is caught in tests/test_mutants.py.

Nothing here creates an array at import time: the adapter must still be able to ask for a second
host device, which JAX allows only before its first operation.
"""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from layer_conformance.reference_impls.jax.dropout import Dropout as _Dropout

from tests.mutants.base_jax import CausalMask, RMSNorm
from tests.mutants.catalogue import Mutant


class GainRawArray(RMSNorm):
    """The gain as a raw jnp array: not an nnx.Param, so nnx.grad and nnx.Optimizer skip it."""
    def make_gain(self, d):
        self.gain = jnp.ones(d)


class GainInPlainList(RMSNorm):
    """The gain inside a plain Python list: flax >= 0.12 refuses it at construction."""
    def make_gain(self, d):
        self.weights = [nnx.Param(jnp.ones(d))]

    def __call__(self, X):
        return self.weights[0][...] * X / self.rms(X)


class EpsOutsideSqrt(RMSNorm):
    """x / (sqrt(mean x^2) + eps): right for large rows, wrong where mean square ~ eps."""
    def rms(self, X):
        return jnp.sqrt((X ** 2).mean(-1, keepdims=True)) + self.eps


class WrongAxis(RMSNorm):
    """Normalizes over the batch axis instead of the feature axis."""
    def rms(self, X):
        return jnp.sqrt((X ** 2).mean(0, keepdims=True) + self.eps)


class MaskAsParam(CausalMask):
    """The mask as an nnx.Param: nnx.Optimizer(wrt=nnx.Param) would be handed it."""
    def held(self, mask):
        return nnx.Param(mask)


class MaskRawArray(CausalMask):
    """The mask as a raw jnp array: no Variable, so typed state (saving, moving) leaves it out."""
    def held(self, mask):
        return mask


@jax.custom_vjp
def ste_fwd_output_only(X):
    return jnp.round(X)


def _fwd_output_only(X):
    return jnp.round(X)  # must be (output, residuals)


ste_fwd_output_only.defvjp(_fwd_output_only, lambda residuals, g: (g,))


@jax.custom_vjp
def ste_bwd_bare_array(X):
    return jnp.round(X)


def _bwd_bare_array(residuals, g):
    return g  # must be a tuple: one gradient per argument, (g,)


ste_bwd_bare_array.defvjp(lambda X: (jnp.round(X), None), _bwd_bare_array)


@jax.custom_vjp
def ste_doubled(X):
    """A wrong surrogate: the gradient doubled."""
    return jnp.round(X)


ste_doubled.defvjp(lambda X: (jnp.round(X), None), lambda residuals, g: (2 * g,))


def round_no_surrogate(X):
    """Plain jnp.round: autodiff gives the true derivative, zero, not the straight-through one."""
    return jnp.round(X)



class BatchMeanSquare(RMSNorm):
    """RMSNorm with `.mean()` left without its axis: one mean square over the whole batch (a batch statistic)."""
    def rms(self, X):
        return jnp.sqrt((X ** 2).mean() + self.eps)


class NaNGuardItem(RMSNorm):
    """RMSNorm with a NaN guard read in Python: `if float(jnp.isnan(X).any())` needs the input's values, which a
    shape computed without data (jax.eval_shape) or a traced program (jit, jax.export) does not have."""
    def __call__(self, X):
        if float(jnp.isnan(X).any()):
            raise ValueError("NaN in the input")
        return super().__call__(X)


def sce_closes_over_labels(logits, labels):
    """Softmax cross-entropy whose custom_vjp is defined inside the call and closes over the labels (a batched
    value) instead of taking them as an argument: right under jax.vjp and jit, but under vmap the labels are
    the vectorising trace's, and the gradient of the vmapped function raises UnexpectedTracerError."""
    @jax.custom_vjp
    def loss(z):
        return -jnp.sum(labels * jax.nn.log_softmax(z, axis=-1), axis=-1)

    def fwd(z):
        return loss(z), jax.nn.softmax(z, axis=-1)

    def bwd(p, g):
        return (g[..., None] * (p - labels),)
    loss.defvjp(fwd, bwd)
    return loss(logits)


class GainCheckedInInit(RMSNorm):
    """Validates its initial gain by reading its value in __init__ (bool of an array): under nnx.eval_shape
    (abstract or sharded initialisation) the gain has a shape but no value, so construction raises."""
    def make_gain(self, d):
        super().make_gain(d)
        if not bool(jnp.all(self.gain[...] > 0)):
            raise ValueError("the gain must start positive")


class DropoutSeedFromNumpy(_Dropout):
    """Dropout that seeds its RNG stream from numpy's global RNG instead of forking the nnx.Rngs it is given:
    two constructions with the same seed drop different entries, so no run (nor a restarted training) can be
    repeated. The stream is still an nnx.Rngs stream advanced per call, so each mask is fresh and fair."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p = p
        self.deterministic = False
        self.rngs = nnx.Rngs(dropout=int(np.random.randint(2 ** 31))).dropout


class DropoutIgnoresSeed(_Dropout):
    """Dropout that takes rngs and draws from an nnx.Rngs of its own (seed 0): every construction makes the same
    stream whatever seed it is given, so two models built with different seeds drop the same entries."""
    def __init__(self, p=0.5, *, rngs: nnx.Rngs):
        self.p = p
        self.deterministic = False
        self.rngs = nnx.Rngs(dropout=0).dropout


M = "tests.mutants.jax_mutants"
MUTANTS = [
    Mutant("jax", "rmsnorm", f"{M}:GainRawArray", "parameters", "untracked attribute 'gain' (jax array [8])", blocked=('compiled', 'composition', 'devices', 'export', 'gradients', 'serialization')),
    Mutant("jax", "rmsnorm", f"{M}:GainInPlainList", "parameters", "Found data on value of type '<class 'list'>'",
           blocked=('batching', 'compiled', 'composition', 'device_parity', 'devices', 'export', 'gradients', 'native', 'properties', 'serialization', 'strict_loading', 'values', 'construction', 'abstract')),
    Mutant("jax", "rmsnorm", f"{M}:EpsOutsideSqrt", "values", "case 'edge_rows'", blocked=('gradients', 'native', 'properties')),
    Mutant("jax", "rmsnorm", f"{M}:WrongAxis", "batching", "was perturbed", blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("jax", "rmsnorm", f"{M}:BatchMeanSquare", "batching", "changed when example 0 was perturbed", blocked=('values', 'gradients', 'native', 'properties')),
    Mutant("jax", "rmsnorm", f"{M}:NaNGuardItem", "abstract", "reads a tensor's value in Python",
           also=('batching', 'compiled')),
    Mutant("jax", "softmax_cross_entropy", f"{M}:sce_closes_over_labels", "batching", "closes over a value of the batch",
           also=('export',)),
    Mutant("jax", "causal_mask", f"{M}:MaskAsParam", "buffers", "is registered as trainable",
           blocked=('device_parity', 'export', 'parameters')),
    Mutant("jax", "causal_mask", f"{M}:MaskRawArray", "buffers", "held as a plain attribute 'mask'", blocked=('compiled', 'devices', 'export', 'serialization')),
    Mutant("jax", "round_ste", f"{M}:ste_fwd_output_only", "gradients", "fwd rule _fwd_output_only for function "
           "ste_fwd_output_only must produce a pair", also=('compiled', 'device_parity', 'export', 'batching')),
    Mutant("jax", "round_ste", f"{M}:ste_bwd_bare_array", "gradients", "bwd rule must produce an output with the "
           "same container (pytree) structure", also=('compiled', 'device_parity', 'export', 'batching')),
    Mutant("jax", "round_ste", f"{M}:ste_doubled", "gradients", "2x the expected"),
    Mutant("jax", "round_ste", f"{M}:round_no_surrogate", "gradients", "The gradient is all zeros"),
    Mutant("jax", "rmsnorm", f"{M}:GainCheckedInInit", "construction",
           "constructing the layer under nnx.eval_shape raised"),
    Mutant("jax", "dropout", f"{M}:DropoutSeedFromNumpy", "construction",
           "'rngs.key' differs between two constructions with nnx.Rngs(0) (RNG stream state)"),
    Mutant("jax", "dropout", f"{M}:DropoutSeedFromNumpy", "construction",
           "fork each RNG stream from the rngs given (rngs.dropout.fork())"),
    Mutant("jax", "dropout", f"{M}:DropoutIgnoresSeed", "construction",
           "'rngs.count', 'rngs.key' are the same under nnx.Rngs(0) and nnx.Rngs(1): the constructor takes rngs "
           "and ignores the seed it is given"),
]

# No strict_loading mutant here: an NNX module has no load method of its own to override; its state is
# restored by the caller (nnx.update / replace_by_pure_dict on a state dict), so a layer cannot make its
# load tolerant. The adapter's strict load refuses both mismatches for every layer (strict_loading).
