"""Correct MXNet Gluon 1.9.1 implementations of the bundled contracts: ``<contract>.py`` defines ``IMPL``.

Written in the 1.9.1 idiom with legacy ``mx.nd`` arrays (no ``npx.set_np()``: that switch is
process-wide, and under it 1.9.1's load_parameters fails for a block holding only direct
parameters). Each module applies the numpy-alias shim before importing mxnet.
"""
