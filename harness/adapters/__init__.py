"""The adapters' old import path, kept only for ``mxnet_shim`` (users' layer modules import it): the adapters are
``layer_conformance.layerside.adapters``."""
