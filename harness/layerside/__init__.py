"""What runs beside the layer: the code of the executor processes, which hold frameworks and code under test.

``server`` (the request loop an executor runs) and ``adapters`` (one module per framework) live here, and nothing
of the judge does: the judge (the pytest process) never imports this package, and this package imports of the
rest of ``layer_conformance`` only the modules both sides share (``frameworks``, ``record``, ``errors``,
``binding``, ``wire``: plain data and pure functions). ``tests/meta_tests/test_boundary.py`` holds both sides to it.
"""
