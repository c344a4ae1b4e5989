"""The rmsnorm layer, for the rmsnorm_long_rows contract (the same layer on 4096-wide rows)."""
from layer_conformance.reference_impls.torch.rmsnorm import IMPL

__all__ = ["IMPL"]
