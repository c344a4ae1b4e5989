from functools import partial

import jax

from layer_conformance.reference_impls.jax.swiglu import SwiGLU


class GeGLU(SwiGLU):
    # the exact gelu (erf), named: jax.nn.gelu defaults to the tanh approximation
    gate = staticmethod(partial(jax.nn.gelu, approximate=False))


IMPL = GeGLU
