"""Changes process-global framework state at import, then defines a correct layer."""
import torch

from layer_conformance.reference_impls.torch.rmsnorm import IMPL as _Correct

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

IMPL = _Correct
