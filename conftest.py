"""Project-level pytest configuration.

The conformance plugin itself is installed through the ``pytest11`` entry point
(``layer_conformance.plugin``); ``pyproject.toml`` turns on the bundled conformance run for a bare
``pytest`` in this repository. The harness's own tests live in ``tests/``.
"""
