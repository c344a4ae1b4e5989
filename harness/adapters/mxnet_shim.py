# An alias: users' MXNet layers import the shim from here (the README's path before it moved to layerside).
from ..layerside.adapters.mxnet_shim import apply  # noqa: F401
