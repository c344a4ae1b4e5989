from functools import partial

from torch.nn import functional as F

from layer_conformance.reference_impls.torch.swiglu import SwiGLU


class GeGLU(SwiGLU):
    # the exact gelu (erf), torch's default, named: not the tanh approximation
    gate = staticmethod(partial(F.gelu, approximate="none"))


IMPL = GeGLU
