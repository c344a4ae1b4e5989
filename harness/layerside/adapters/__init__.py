"""Only a compatibility path for the MXNet shim's old documented import,
``from layer_conformance.layerside.adapters.mxnet_shim import apply`` (users' MXNet layer modules have it): the
shim is ``layer_conformance.layerside.mxnet_shim``, the adapters are ``layer_conformance.layerside.<framework>``.
Nothing else lives here."""
