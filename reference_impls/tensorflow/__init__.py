"""Correct TensorFlow / Keras 3 implementations of the bundled contracts: ``<contract>.py`` defines ``IMPL``."""
