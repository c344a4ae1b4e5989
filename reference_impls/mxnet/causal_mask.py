from layer_conformance.layerside.mxnet_shim import apply

apply()  # before importing mxnet: it needs numpy's removed aliases
import numpy as np  # noqa: E402
from mxnet import nd  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class CausalMask(nn.Block):
    def __init__(self, max_len, **kwargs):
        super().__init__(**kwargs)
        # Precompute once for the longest sequence; slice per call. A Constant (grad_req
        # 'null') saves and moves with the block, and no Trainer updates it.
        with self.name_scope():
            self.mask = self.params.get_constant(
                'mask', nd.array(np.triu(np.ones((max_len, max_len)), 1), dtype='bool'))

    def forward(self, scores):
        T = scores.shape[-1]
        # legacy operators take no bool operands: select with a mask of the scores' dtype
        mask = self.mask.data(scores.context)[:T, :T].astype(scores.dtype)
        mask = nd.broadcast_to(mask.reshape((1,) * (scores.ndim - 2) + (T, T)), scores.shape)
        return nd.where(mask, nd.full(scores.shape, -np.inf, ctx=scores.context, dtype=scores.dtype), scores)


IMPL = CausalMask
