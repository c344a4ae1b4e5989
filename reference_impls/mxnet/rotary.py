import numpy as np
from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
from mxnet import nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


def rotate_half(x):
    # the halves pair up (Llama, GPT-NeoX): feature i with feature i + head_dim/2, not 2i with 2i + 1
    h = x.shape[-1] // 2
    return nd.concat(-nd.slice_axis(x, axis=-1, begin=h, end=None), nd.slice_axis(x, axis=-1, begin=0, end=h),
                     dim=-1)


class Rotary(nn.Block):
    """X: [batch, heads, seq, head_dim], positions 0..seq-1 on the second to last axis."""
    rotate_half = staticmethod(rotate_half)

    def __init__(self, head_dim, base=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.head_dim = head_dim
        self.base = base

    def cos_sin(self, seq, ctx, dtype):
        # inv_freq and the angles in float32 at least, from the constructor's numbers: no floating state for a
        # cast to 16 bits to round (a position multiplies inv_freq's rounding)
        exponents = nd.arange(0, self.head_dim, 2, ctx=ctx, dtype=dtype) / self.head_dim
        inv_freq = 1.0 / nd.power(nd.full((1,), self.base, ctx=ctx, dtype=dtype), exponents)
        angles = nd.broadcast_mul(nd.arange(seq, ctx=ctx, dtype=dtype).reshape((-1, 1)), inv_freq.reshape((1, -1)))
        angles = nd.concat(angles, angles, dim=-1)
        return nd.cos(angles), nd.sin(angles)

    def forward(self, X):
        wide = "float64" if X.dtype == np.float64 else "float32"
        cos, sin = self.cos_sin(X.shape[-2], X.context, wide)
        Xw = X.astype(wide)
        out = nd.broadcast_add(nd.broadcast_mul(Xw, cos), nd.broadcast_mul(self.rotate_half(Xw), sin))
        return out.astype(X.dtype)  # rounded once, to the input's dtype


IMPL = Rotary
