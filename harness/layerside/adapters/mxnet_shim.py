"""The MXNet shim's old import path, kept for users' layer modules: it is ``layer_conformance.layerside.mxnet_shim``."""
from ..mxnet_shim import ALIASES, apply  # noqa: F401
