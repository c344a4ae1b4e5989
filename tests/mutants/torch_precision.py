"""Layers whose failure in a dtype is the precision they compute at (layer_conformance.checks.precision): the source
chapter's RMSNorm with its statistic in the input's dtype, and one that computes float64 inputs in float32."""
import torch

from layer_conformance.reference_impls.torch.rmsnorm import RMSNorm as _RMSNorm
from tests.mutants.catalogue import Mutant
from tests.mutants.precision_causes import FLOAT32, NARROW

M = "tests.mutants.torch_precision"


class RMSNormChapter(_RMSNorm):
    """The source chapter's formula as written: the mean square in the input's own dtype."""
    def forward(self, X):
        return self.gain * X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + self.eps)


class RMSNormFloat32Inside(_RMSNorm):
    """Computes in float32 whatever the input and casts back: float64 inputs get float32 precision."""
    def forward(self, X):
        X32, g32 = X.float(), self.gain.float()
        return (g32 * X32 * torch.rsqrt(X32.pow(2).mean(-1, keepdim=True) + self.eps)).to(X.dtype)


MUTANTS = [
    Mutant("torch", "rmsnorm", f"{M}:RMSNormChapter", "values", NARROW.format(dtype="float16"), dtype="float16",
           blocked=("native", "gradients", "properties")),
    # float32's error passes values' float64 tolerance here, not the gradients'
    Mutant("torch", "rmsnorm", f"{M}:RMSNormFloat32Inside", "gradients", FLOAT32, dtype="float64"),
]


class RMSNormEpsFor64(_RMSNorm):
    """A float64 path with its own eps (1e-5 "for double precision"): wrong in float64 only, by far more
    than float32's rounding, so no precision explains it."""
    def forward(self, X):
        eps = 1e-5 if X.dtype == torch.float64 else self.eps
        return self.gain * X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + eps)


MUTANTS += [
    Mutant("torch", "rmsnorm", f"{M}:RMSNormEpsFor64", "values", "so float64 rounding alone does not explain it",
           dtype="float64", blocked=("native", "gradients", "properties")),
]


class RMSNormHalvedInFloat16(_RMSNorm):
    """Right in float32, but scaled by half in float16: the wider run is right, yet no rounding makes the typical
    element move by 2^10 ulps, so no precision cause may be claimed (a near miss of computes_narrow)."""
    def forward(self, X):
        out = super().forward(X)
        return out * 0.5 if X.dtype == torch.float16 else out


MUTANTS += [
    Mutant("torch", "rmsnorm", f"{M}:RMSNormHalvedInFloat16", "values",
           "so float16 rounding alone does not explain it", dtype="float16",
           blocked=("native", "gradients", "properties")),
]
