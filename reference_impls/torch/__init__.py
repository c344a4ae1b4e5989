"""Correct PyTorch implementations of the bundled contracts: ``<contract>.py`` defines ``IMPL``."""
